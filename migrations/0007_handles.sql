-- Handles (docs/design.md §12): a profile is found by its username, compared without case, and a
-- handle its owner gives up — by a rename or a deletion — stays reserved for that owner for a
-- while (30 days unless `profile_handle_settings` says otherwise): its lookups redirect to the
-- owner's new handle and no one else takes it. The rules live here, in triggers, so they hold
-- for every writer: each instance, and an operator at a psql prompt.

-- The handle of a username: its ASCII letters in lower case, nothing else changed. `COLLATE "C"`
-- keeps it the same under every locale (a Turkish collation lowers 'I' to a dotless 'ı').
CREATE FUNCTION profile_handle(username TEXT) RETURNS TEXT
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT lower(username COLLATE "C") $$;

-- One holder per handle: `Ada` and `ada` are one handle. The migration fails if two profiles
-- already hold one handle in two spellings; rename one of them first.
CREATE UNIQUE INDEX user_profiles_handle_key ON user_profiles (profile_handle(username));

-- How long a handle given up stays its last owner's. One row; `UPDATE profile_handle_settings
-- SET reservation = '7 days'` changes it for every handle given up afterwards.
CREATE TABLE profile_handle_settings (
    only_row    BOOLEAN  PRIMARY KEY DEFAULT true CHECK (only_row),
    reservation INTERVAL NOT NULL DEFAULT '30 days' CHECK (reservation >= '0')
);
INSERT INTO profile_handle_settings DEFAULT VALUES;

-- Handles given up and still reserved (and, until taken again, some whose reservation ended:
-- a lookup reads only rows with `reserved_until > now()`).
CREATE TABLE username_reservations (
    handle         TEXT        PRIMARY KEY,       -- profile_handle(username)
    username       TEXT        NOT NULL,          -- the spelling its owner had
    profile_id     BIGINT      NOT NULL,          -- the owner (who may take it back)
    released_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    reserved_until TIMESTAMPTZ NOT NULL
);
CREATE INDEX username_reservations_profile ON username_reservations (profile_id);

-- Serializes every change of one handle: a rename away from it and another profile taking it
-- never pass each other half-done. Locks are taken in the handles' order, so two renames that
-- swap handles wait for each other instead of deadlocking.
CREATE FUNCTION profile_handles_lock(first TEXT, second TEXT) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    IF second IS NULL OR first = second THEN
        PERFORM pg_advisory_xact_lock(1886351205, hashtext(first));
    ELSIF first < second THEN
        PERFORM pg_advisory_xact_lock(1886351205, hashtext(first));
        PERFORM pg_advisory_xact_lock(1886351205, hashtext(second));
    ELSE
        PERFORM pg_advisory_xact_lock(1886351205, hashtext(second));
        PERFORM pg_advisory_xact_lock(1886351205, hashtext(first));
    END IF;
END
$$;

-- Reserves a handle given up for its last owner.
CREATE FUNCTION profile_handle_reserve(handle TEXT, username TEXT, owner BIGINT) RETURNS void
    LANGUAGE sql AS $$
    INSERT INTO username_reservations (handle, username, profile_id, released_at, reserved_until)
    SELECT handle, username, owner, now(), now() + reservation FROM profile_handle_settings
    ON CONFLICT (handle) DO UPDATE
        SET username = excluded.username, profile_id = excluded.profile_id,
            released_at = excluded.released_at, reserved_until = excluded.reserved_until;
$$;

-- INSERT, or an UPDATE that changes the handle: the new handle must not be reserved for another
-- profile (23505, constraint `username_reserved`); a reservation of the profile's own is taken
-- back; the old handle is reserved for the profile. A new spelling of the same handle (`ada` →
-- `Ada`) reserves nothing.
CREATE FUNCTION user_profiles_keep_handles() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    new_handle TEXT := profile_handle(NEW.username);
    old_handle TEXT;
    owner      BIGINT;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        old_handle := profile_handle(OLD.username);
        IF old_handle = new_handle THEN
            RETURN NEW;
        END IF;
    END IF;
    PERFORM profile_handles_lock(new_handle, old_handle);
    -- After the lock, so a reservation committed while this waited is seen (READ COMMITTED takes
    -- a new snapshot per statement).
    SELECT profile_id INTO owner FROM username_reservations
        WHERE handle = new_handle AND reserved_until > now();
    IF FOUND AND owner <> NEW.id THEN
        RAISE EXCEPTION 'the username % is reserved for another profile', NEW.username
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'username_reserved';
    END IF;
    DELETE FROM username_reservations WHERE handle = new_handle;
    IF old_handle IS NOT NULL THEN
        PERFORM profile_handle_reserve(old_handle, OLD.username, OLD.id);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER user_profiles_keep_handles
    BEFORE INSERT OR UPDATE OF username ON user_profiles
    FOR EACH ROW EXECUTE FUNCTION user_profiles_keep_handles();

-- DELETE: the profile's handle is reserved for its id like a handle renamed away, so no one
-- takes it the moment its owner leaves; the same id created again may take it back. BEFORE the
-- row goes, so the lock is taken before the row's index entry is, as a rename takes it.
-- (TRUNCATE reserves nothing.)
CREATE FUNCTION user_profiles_reserve_deleted_handle() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM profile_handles_lock(profile_handle(OLD.username), NULL);
    PERFORM profile_handle_reserve(profile_handle(OLD.username), OLD.username, OLD.id);
    RETURN OLD;
END
$$;

CREATE TRIGGER user_profiles_reserve_deleted_handle
    BEFORE DELETE ON user_profiles
    FOR EACH ROW EXECUTE FUNCTION user_profiles_reserve_deleted_handle();
