# Sourced by the bench scripts: installs a missing command from Debian's packages.
need() { command -v "$1" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$2" >/dev/null; }; }
