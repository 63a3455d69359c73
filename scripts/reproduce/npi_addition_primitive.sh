#!/usr/bin/env bash
# Claim: addition-primitive (addition whose column step applies the learned full-adder primitive,
# trained by `engram train primitives`) with default options, seeds 1-3, scores 1.0 at length 100
# (1000 problems) and 1000 (100 problems). The same script as npi_addition.sh; writes
# results/npi_addition_primitive.json.
ADDITION_TASK=addition-primitive exec bash "$(dirname "$0")/npi_addition.sh" "$@"
