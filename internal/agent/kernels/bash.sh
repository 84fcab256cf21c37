# agent2env bash kernel driver. Run as: bash --noprofile --norc -c "<this file>".
# Protocol: requests on fd 3 ("<marker> <n>\n" and n bytes of code), control
# lines on fd 4 ({"type":"ready"} once, {"type":"done",...} after each run).
# Code is eval'ed in this shell, so variables, functions, aliases and the
# working directory persist. After each run the marker is written to fd 1 and
# fd 2, then "done". SIGINT stops the foreground command; a pure-bash busy loop
# may not stop, and the agent then restarts the kernel.

exec 63<&3 62>&4 3<&- 4>&-

__a2e_interrupted=0
trap '__a2e_interrupted=1' INT

# __a2e_json prints $1 as a JSON string.
__a2e_json() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\n'/\\n}
	s=${s//$'\r'/\\r}
	s=${s//$'\t'/\\t}
	s=${s//[$'\x01'-$'\x1f']/}
	printf '"%s"' "$s"
}

printf '{"type":"ready","language":"bash","version":"%s"}\n' "$BASH_VERSION" >&62

while :; do
	IFS=' ' read -r -u 63 __a2e_marker __a2e_n || exit 0
	__a2e_code=
	if ((__a2e_n > 0)); then
		# Count bytes, not characters: read in the C locale.
		__a2e_lc_set=${LC_ALL+x} __a2e_lc=${LC_ALL-}
		LC_ALL=C
		IFS= read -r -d '' -N "$__a2e_n" -u 63 __a2e_code
		if [[ -n $__a2e_lc_set ]]; then LC_ALL=$__a2e_lc; else unset LC_ALL; fi
	fi
	__a2e_error=null
	if ! __a2e_msg=$(bash -n -c "$__a2e_code" 2>&1); then
		printf '%s\n' "$__a2e_msg" >&2
		__a2e_error='{"name":"SyntaxError","value":'$(__a2e_json "${__a2e_msg%%$'\n'*}")',"traceback":'$(__a2e_json "$__a2e_msg")',"kind":"syntax"}'
	else
		__a2e_interrupted=0
		eval "$__a2e_code"
		__a2e_status=$?
		if ((__a2e_interrupted)); then
			__a2e_error='{"name":"KeyboardInterrupt","value":"interrupted","traceback":"","kind":"runtime"}'
		elif ((__a2e_status != 0)); then
			__a2e_error='{"name":"ExitStatus","value":"exit status '$__a2e_status'","traceback":"","kind":"runtime"}'
		fi
	fi
	printf '%s' "$__a2e_marker"
	printf '%s' "$__a2e_marker" >&2
	printf '{"type":"done","result":null,"error":%s}\n' "$__a2e_error" >&62
done
