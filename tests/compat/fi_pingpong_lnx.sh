#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Debian's real fi_pingpong over weft's linked provider on one host (every
# peer over its shm part): rdm endpoints, msg and tagged modes, every size,
# data checks on; the same script as shm's. Between two hosts (its tcp part):
# netns.fi_pingpong_weft.
#   fi_pingpong_lnx.sh BUILD [VIA]
WEFT_PINGPONG_PROV=lnx exec bash "$(dirname "$0")/fi_pingpong_shm.sh" "$@"
