"""The deployment checks of scripts/check-deploy.py: common (the registry and runner of checks and
the helpers both parts use), static_checks (the files, no server) and live_checks (the binary with
nginx and the servers of scripts/deps.sh)."""
