-- User profiles. The id is the user's id from the identity system, not a sequence.
CREATE TABLE user_profiles (
    id           BIGINT      PRIMARY KEY,
    username     TEXT        NOT NULL UNIQUE,
    display_name TEXT        NOT NULL,
    version      INTEGER     NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
