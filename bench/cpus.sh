# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the bench scripts: CPU lists.
# expand_cpus LIST: "0-2,5" -> "0 1 2 5" (one a line)
expand_cpus() {  # "0-2,5" -> "0 1 2 5"
  local part
  for part in ${1//,/ }; do
    if [[ $part == *-* ]]; then seq "${part%-*}" "${part#*-}"; else echo "$part"; fi
  done
}
# allowed_cpus: the CPUs this process may run on, one a line
allowed_cpus() {
  expand_cpus "$(awk '/Cpus_allowed_list/{print $2}' /proc/self/status)"
}
