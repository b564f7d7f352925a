-- PostgreSQL enforces what the cache relies on (docs/design.md §2.5): a version names exactly one
-- content of an id over its whole history, and every later content has a higher version —
-- whoever writes: this service, a migration, a person at a psql prompt, a DELETE and INSERT of the
-- same id. What a BEFORE trigger writes is what goes to WAL, so the change feed decodes the
-- corrected row and repairs the cache like any other change.

-- The last version of every deleted id, so that an id created again continues its numbering
-- (Uber's CacheFront keeps tombstones for deletes for the same reason).
CREATE TABLE user_profile_tombstones (
    id         BIGINT      PRIMARY KEY,
    version    INTEGER     NOT NULL,
    deleted_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- After the database went back in time (a restore, a failover to a standby that was behind), the
-- versions the lost history handed out are known only outside it: the running change feed notices
-- (docs/design.md §3.7) and raises this floor above every version that history can have given
-- before it invalidates the cache, so a new version never repeats one a client may hold.
CREATE TABLE profile_version_floor (
    singleton BOOLEAN PRIMARY KEY DEFAULT true CHECK (singleton),
    floor     INTEGER NOT NULL DEFAULT 0 CHECK (floor >= 0),
    -- When it was raised: an instance that noticed the same restore after another one raised
    -- it (later than the instance last saw the old database) leaves it alone.
    raised_at TIMESTAMPTZ
);
INSERT INTO profile_version_floor DEFAULT VALUES;

-- Every version given from now on is above the floor.
CREATE FUNCTION profile_version_above_floor(candidate INTEGER) RETURNS INTEGER
    LANGUAGE sql STABLE AS $$ SELECT greatest(candidate, (SELECT floor + 1 FROM profile_version_floor)) $$;

-- The content of a row: every column but the version and its timestamp, whatever columns the
-- table has now or gains later (ALTER TABLE … ADD COLUMN).
CREATE FUNCTION user_profiles_content(profile user_profiles) RETURNS jsonb
    LANGUAGE sql STABLE AS $$ SELECT to_jsonb(profile) - 'version' - 'updated_at' $$;

-- UPDATE: a changed content gets a higher version when the statement did not raise it (the
-- natural `UPDATE … SET display_name = …`); a version never goes down (an unchanged content keeps
-- its version, a changed one gets the old version + 1); updated_at follows every new version
-- unless the statement set it. The service's own UPDATE raises the version by exactly one and is
-- left as it is.
CREATE FUNCTION user_profiles_keep_version_rules() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id IS DISTINCT FROM OLD.id THEN
        RAISE EXCEPTION 'user_profiles.id cannot change (% to %): delete the row and insert it under the new id', OLD.id, NEW.id
            USING ERRCODE = 'check_violation';
    END IF;
    IF user_profiles_content(NEW) IS DISTINCT FROM user_profiles_content(OLD) THEN
        IF NEW.version <= OLD.version THEN
            NEW.version := OLD.version + 1;
        END IF;
    ELSIF NEW.version < OLD.version THEN
        NEW.version := OLD.version;
    END IF;
    IF NEW.version > OLD.version THEN
        NEW.version := profile_version_above_floor(NEW.version);
    END IF;
    IF NEW.version <> OLD.version AND NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
        NEW.updated_at := now();
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER user_profiles_keep_version_rules
    BEFORE UPDATE ON user_profiles
    FOR EACH ROW EXECUTE FUNCTION user_profiles_keep_version_rules();

-- INSERT: an id that existed before continues above its last version.
CREATE FUNCTION user_profiles_continue_numbering() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    last_version INTEGER;
BEGIN
    SELECT version INTO last_version FROM user_profile_tombstones WHERE id = NEW.id;
    IF FOUND AND NEW.version <= last_version THEN
        NEW.version := last_version + 1;
    END IF;
    NEW.version := profile_version_above_floor(NEW.version);
    RETURN NEW;
END
$$;

CREATE TRIGGER user_profiles_continue_numbering
    BEFORE INSERT ON user_profiles
    FOR EACH ROW EXECUTE FUNCTION user_profiles_continue_numbering();

-- DELETE and TRUNCATE leave a tombstone of each row's last version.
CREATE FUNCTION user_profiles_leave_tombstone() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO user_profile_tombstones (id, version) VALUES (OLD.id, OLD.version)
    ON CONFLICT (id) DO UPDATE
        SET version = greatest(user_profile_tombstones.version, excluded.version), deleted_at = now();
    RETURN OLD;
END
$$;

CREATE TRIGGER user_profiles_leave_tombstone
    AFTER DELETE ON user_profiles
    FOR EACH ROW EXECUTE FUNCTION user_profiles_leave_tombstone();

CREATE FUNCTION user_profiles_leave_tombstones_on_truncate() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO user_profile_tombstones (id, version)
    SELECT id, version FROM user_profiles
    ON CONFLICT (id) DO UPDATE
        SET version = greatest(user_profile_tombstones.version, excluded.version), deleted_at = now();
    RETURN NULL;
END
$$;

CREATE TRIGGER user_profiles_leave_tombstones_on_truncate
    BEFORE TRUNCATE ON user_profiles
    FOR EACH STATEMENT EXECUTE FUNCTION user_profiles_leave_tombstones_on_truncate();
