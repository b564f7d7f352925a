-- The fields a profile carries beside its name (docs/design.md §11). Each is a nullable text
-- column of user_profiles and a row here, which the service reads at start: adding a field is one
-- migration that does both, e.g.
--
--   ALTER TABLE user_profiles ADD COLUMN pronouns TEXT;
--   INSERT INTO profile_fields (name, kind, max_length, position) VALUES ('pronouns', 'text', 40, 5);
--
-- then a rolling restart. The version rules (0003) already count every column as content, and
-- adding a nullable column rewrites no row, so no version moves.
CREATE TABLE profile_fields (
    -- The column's name and the JSON member's: a-z, 0-9 and _, starting with a letter.
    name       TEXT    PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]{0,62}$'
                                          AND name NOT IN ('id', 'username', 'display_name', 'version', 'created_at', 'updated_at')),
    -- text: one line; paragraph: line feeds allowed; https_url: an absolute https URL.
    kind       TEXT    NOT NULL CHECK (kind IN ('text', 'paragraph', 'https_url')),
    -- The longest value in Unicode code points (NFC); all fields together at most 8,000.
    max_length INTEGER NOT NULL CHECK (max_length BETWEEN 1 AND 8000),
    -- Where the field appears in a profile's JSON.
    position   INTEGER NOT NULL UNIQUE
);

ALTER TABLE user_profiles
    ADD COLUMN bio        TEXT,
    ADD COLUMN avatar_url TEXT,
    ADD COLUMN location   TEXT,
    ADD COLUMN website    TEXT;

INSERT INTO profile_fields (name, kind, max_length, position) VALUES
    ('bio',        'paragraph', 500,  1),
    ('avatar_url', 'https_url', 2048, 2),
    ('location',   'text',      100,  3),
    ('website',    'https_url', 2048, 4);
