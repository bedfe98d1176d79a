#!/usr/bin/env bash
# Checks the module manager's alert rules with promtool (Debian's `prometheus` package) and runs
# their unit tests: every alert fires, and does not fire.
set -euo pipefail
cd "$(dirname "$0")"
promtool check rules rules.yaml
promtool test rules tests.yaml
