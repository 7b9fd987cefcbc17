trap 'exit 1' TERM

set -o xtrace
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
printf '\''\033[32;1m$ %s\033[0;m\n'\'' '\''echo pre-build'\''
echo pre-build
printf '\''\033[32;1m$ %s\033[0;m\n'\'' '\''echo "hello $CI_JOB_ID"'\''
echo "hello $CI_JOB_ID"
printf '\''\033[32;1m$ %s # collapsed multi-line command\033[0;m\n'\'' '\''if true; then'\''
if true; then
  echo multi
fi
echo

printf '\''\033[32;1m$ %s\033[0;m\n'\'' '\''printf '\''\'\'''\''%s\n'\''\'\'''\'' '\''\'\'''\''it'\''\'\'''\'''\''\'\'''\''s'\''\'\'''\'' `id -u` $(pwd)'\''
printf '\''%s\n'\'' '\''it'\'''\''s'\'' `id -u` $(pwd)
printf '\''\033[32;1m$ %s\033[0;m\n'\'' '\''echo post-build'\''
echo post-build
' ) < /dev/null
exit 0
