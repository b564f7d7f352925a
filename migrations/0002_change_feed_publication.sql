-- The change feed (docs/design.md §3) streams user_profiles' committed changes through this
-- publication and a logical replication slot (created by `migrate` and `serve`, outside any
-- transaction, since PostgreSQL refuses to create a slot in one that has written).
CREATE PUBLICATION profile_service_changes FOR TABLE user_profiles;
