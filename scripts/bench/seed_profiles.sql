-- The benchmarks' profiles 1…10,000, each back at version 1 (every benchmark starts from the
-- same rows). Past the version rules (migrations/0003), which never let a version go down.
-- Profiles of an app's size: a bio of 160 characters, an avatar URL and a location (about 430
-- bytes of JSON each, against 120 for the name alone).
SET session_replication_role = replica;
INSERT INTO user_profiles (id, username, display_name, version, bio, avatar_url, location)
SELECT i, 'user' || i, 'User ' || i, 1,
    left('User ' || i || ' writes about distributed systems, caches and coffee; reads Borges and Le Guin; '
         || 'runs slow marathons by the sea and answers every message, eventually. ' || repeat('More. ', 20), 160),
    'https://cdn.example.com/avatars/' || i || '/' || md5(i::text) || '.jpg',
    'Lisbon, Portugal'
FROM generate_series(1, 10000) AS i
ON CONFLICT (id) DO UPDATE SET display_name = EXCLUDED.display_name, bio = EXCLUDED.bio, avatar_url = EXCLUDED.avatar_url,
    location = EXCLUDED.location, version = 1, updated_at = now();
