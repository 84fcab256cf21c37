# agent2env bash kernel driver, run as `bash --noprofile --norc -c "<this file>"`.
# Requests arrive on fd 3, each a "<marker> <n> <k> <m>\n" line, n bytes of code, then
# m bytes of k "NAME=value\0" entries exported for the run and put back after it. JSON
# lines go to fd 4: "ready" once at start, "started" once a run takes SIGINT (the
# agent holds one back until then) and "done" at its end, after the marker has been
# written raw to fd 1 and then fd 2. The code is sourced in this shell, so variables,
# functions, cd, options and aliases persist. SIGINT ends the foreground command and
# the code's top level (or the function it is in), and is ignored between runs. The
# driver's names all start with __a2e_.

# __a2e_json STRING sets REPLY to STRING as a JSON string.
__a2e_json() {
  local s=$1 i hex char
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  for ((i = 1; i < 32; i++)); do
    printf -v hex %02x "$i"
    printf -v char "\\x$hex"
    s=${s//"$char"/\\u00$hex}
  done
  REPLY="\"$s\""
}

# Move the pipes out of the user's way, leaving fds 3 and 4 to the code, and keep the
# output pipes for the markers whatever the code does with its fds 1 and 2.
exec {__a2e_requests}<&3 {__a2e_control}>&4 {__a2e_stdout}>&1 {__a2e_stderr}>&2 3<&- 4>&-
trap '' INT
__a2e_options=$-
printf '{"type":"ready","language":"bash","version":"%s.%s.%s"}\n' "${BASH_VERSINFO[@]:0:3}" >&"$__a2e_control"

while IFS=' ' read -r -u "$__a2e_requests" __a2e_marker __a2e_size __a2e_entries __a2e_; do
  LC_ALL=C IFS= read -r -N "$__a2e_size" -u "$__a2e_requests" __a2e_code
  # Each variable's name and, if it was set, the declaration that puts it back.
  __a2e_names=() __a2e_saved=()
  for ((__a2e_i = 0; __a2e_i < __a2e_entries; __a2e_i++)); do
    LC_ALL=C IFS= read -r -d '' -u "$__a2e_requests" __a2e_entry
    __a2e_names+=("${__a2e_entry%%=*}")
    if [[ -v ${__a2e_entry%%=*} ]]; then
      __a2e_saved+=("$(declare -p "${__a2e_entry%%=*}")")
    else
      __a2e_saved+=("")
    fi
    export "$__a2e_entry"
  done
  __a2e_error=null
  # extglob only lets more code parse, as when the code turns it on before using it.
  if __a2e_message=$(printf %s "$__a2e_code" | "$BASH" -n -O extglob 2>&1); then
    __a2e_interrupted=
    # Within the code (BASH_SOURCE is set) return at once, from the code or function.
    trap '__a2e_interrupted=1; [[ ${BASH_SOURCE[0]-} ]] && return 130' INT
    printf '{"type":"started"}\n' >&"$__a2e_control"
    # The code runs with xtrace if it was on; the driver's own commands never are.
    __a2e_prefix=
    if [[ $__a2e_options == *x* ]]; then __a2e_prefix='set -x; '; fi
    for __a2e_once in 1; do # takes a `break` or `continue` at the code's top level
      # A SIGINT whose trap ran before the code's first line is not lost: the code
      # does not run. (The guard shares the code's first line, as the prefix does.)
      source <(printf %s%s%s '[[ $__a2e_interrupted ]] && return 130; ' "$__a2e_prefix" "$__a2e_code")
    done
    { __a2e_status=$? __a2e_options=$-; set +x; } 2>/dev/null
    trap '' INT
    if [[ $__a2e_interrupted ]]; then
      __a2e_error='{"name":"KeyboardInterrupt","value":"interrupted","traceback":"","kind":"runtime"}'
    elif ((__a2e_status != 0)); then
      __a2e_error='{"name":"ExitStatus","value":"exit status '$__a2e_status'","traceback":"","kind":"runtime"}'
    fi
  else
    printf '%s\n' "$__a2e_message" >&2
    __a2e_json "${__a2e_message%%$'\n'*}"
    __a2e_error='{"name":"SyntaxError","value":'$REPLY
    __a2e_json "$__a2e_message"
    __a2e_error+=',"traceback":'$REPLY',"kind":"syntax"}'
  fi
  for __a2e_i in "${!__a2e_names[@]}"; do
    unset -v "${__a2e_names[__a2e_i]}"
    if [[ ${__a2e_saved[__a2e_i]} ]]; then
      eval "${__a2e_saved[__a2e_i]}"
    fi
  done
  printf %s "$__a2e_marker" >&"$__a2e_stdout"
  printf %s "$__a2e_marker" >&"$__a2e_stderr"
  printf '{"type":"done","result":null,"error":%s}\n' "$__a2e_error" >&"$__a2e_control"
done
