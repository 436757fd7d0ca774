#!/usr/bin/env bash
# Regenerates docs/configuration.md from the config declarations (tests check it is current).
set -euo pipefail
cd "$(dirname "$0")/.."
{
    echo "# Configuration reference"
    echo
    echo "Generated from the code's config declarations by \`docs/gen_configuration.sh\`; do not edit."
    echo
    .venv/bin/python -m broker config-docs
    .venv/bin/python -m broker.client.cli config-docs
    .venv/bin/python -m schemas.registry config-docs
    echo
    .venv/bin/python -m ingest config-docs
} > docs/configuration.md
