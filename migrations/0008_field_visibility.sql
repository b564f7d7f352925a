-- Who reads and who writes each declared field (docs/design.md §13), and two kinds for what
-- fields only their owner reads tend to hold. Out of the box every field stays public and
-- written by its owner. A field only its owner (and holders of profiles:admin) reads, e.g.
--
--   ALTER TABLE user_profiles ADD COLUMN email TEXT;
--   INSERT INTO profile_fields (name, kind, max_length, position, read_by) VALUES ('email', 'email', 254, 5, 'owner');
--
-- then a rolling restart: an instance reads the declarations at start.
ALTER TABLE profile_fields
    -- everyone: anyone who may read the profile; owner: its owner and administrators only.
    ADD COLUMN read_by    TEXT NOT NULL DEFAULT 'everyone' CHECK (read_by IN ('everyone', 'owner')),
    -- owner: its owner (and administrators); admin: holders of profiles:admin only (a mark, a role).
    ADD COLUMN written_by TEXT NOT NULL DEFAULT 'owner' CHECK (written_by IN ('owner', 'admin'));

-- email: local@domain in ASCII (docs/api.md); date: a calendar date YYYY-MM-DD.
ALTER TABLE profile_fields DROP CONSTRAINT profile_fields_kind_check;
ALTER TABLE profile_fields
    ADD CONSTRAINT profile_fields_kind_check CHECK (kind IN ('text', 'paragraph', 'https_url', 'email', 'date'));
