#!/usr/bin/env bash
# Kernel-backend tests: run directly where sch_netem exists, else inside the netem VM.
set -euo pipefail
BUILD=${1:-build}
shopt -s nullglob
tests=("$BUILD"/tests/kernel/test_*)
if [ ${#tests[@]} -eq 0 ]; then echo "check-kernel: no kernel-backend tests built"; exit 0; fi
