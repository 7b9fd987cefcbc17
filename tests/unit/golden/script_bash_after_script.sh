trap 'exit 1' TERM

case "$(set -o)" in *pipefail*) set -o pipefail;; esac
set -o errexit
set +o noclobber
( trap 'exit 1' TERM; eval 'export CI_JOB_ID='\''42'\''
export CI_PROJECT_DIR='\''/builds/t3_abc/0/acme/widget'\''
export NASTY='\''a'\''\'\'''\''b"c $(x) `y` \n
%s'\''
# variable 3 skipped: its name is not a valid shell variable name
mkdir -p '\''/builds/t3_abc/0/acme/widget.tmp'\''
(umask 077 && rm -f '\''/builds/t3_abc/0/acme/widget.tmp/CA_FILE'\'' && printf '\''%s'\'' '\''-----BEGIN-----
x
'\'' > '\''/builds/t3_abc/0/acme/widget.tmp/CA_FILE'\'')
export CA_FILE='\''/builds/t3_abc/0/acme/widget.tmp/CA_FILE'\''
export EMPTY='\'''\''
export GITLAB_ENV='\''/builds/t3_abc/0/acme/widget.tmp/gitlab_runner_env'\''
mkdir -p '\''/builds/t3_abc/0/acme/widget.tmp'\''
touch "$GITLAB_ENV"
while IFS= read -r _runner_env_line || [ -n "$_runner_env_line" ]; do
  case "$_runner_env_line" in *=*) export "$_runner_env_line";; esac
done < "$GITLAB_ENV"
unset _runner_env_line
cd '\''/builds/t3_abc/0/acme/widget'\''
printf '\''\033[32;1m%s\033[0;m\n'\'' '\''Running after script...'\''
printf '\''\033[32;1m$ %s\033[0;m\n'\'' '\''echo "hello $CI_JOB_ID"'\''
echo "hello $CI_JOB_ID"
_runner_exit_code=$?; if [ $_runner_exit_code -ne 0 ]; then exit $_runner_exit_code; fi
printf '\''section_start:%s:%s[hide_duration=true,collapsed=true]\r\033[0K\033[32;1m$ %s\033[0;m\n'\'' "$(date +%s)" '\''section_after_script_step_1'\'' '\''if true; then
  echo multi
fi'\''
if true; then
  echo multi
fi
_runner_exit_code=$?; if [ $_runner_exit_code -ne 0 ]; then exit $_runner_exit_code; fi
printf '\''section_end:%s:%s\r\033[0K\n'\'' "$(date +%s)" '\''section_after_script_step_1'\''
echo

_runner_exit_code=$?; if [ $_runner_exit_code -ne 0 ]; then exit $_runner_exit_code; fi
printf '\''\033[32;1m$ %s\033[0;m\n'\'' '\''printf '\''\'\'''\''%s\n'\''\'\'''\'' '\''\'\'''\''it'\''\'\'''\'''\''\'\'''\''s'\''\'\'''\'' `id -u` $(pwd)'\''
printf '\''%s\n'\'' '\''it'\'''\''s'\'' `id -u` $(pwd)
_runner_exit_code=$?; if [ $_runner_exit_code -ne 0 ]; then exit $_runner_exit_code; fi
' ) < /dev/null
exit 0
