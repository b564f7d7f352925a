-- The benchmarks' profiles 1…10,000, each back at version 1 (every benchmark starts from the
-- same rows). Past the version rules (migrations/0003), which never let a version go down.
SET session_replication_role = replica;
INSERT INTO user_profiles (id, username, display_name, version)
SELECT i, 'user' || i, 'User ' || i, 1 FROM generate_series(1, 10000) AS i
ON CONFLICT (id) DO UPDATE SET display_name = EXCLUDED.display_name, version = 1, updated_at = now();
