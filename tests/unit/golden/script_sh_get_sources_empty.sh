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
export GIT_TERMINAL_PROMPT=0
export GCM_INTERACTIVE=Never
printf '\''\033[32;1m%s\033[0;m\n'\'' '\''Skipping Git repository setup and creating an empty build directory'\''
rm -rf '\''/builds/t3_abc/0/acme/widget'\''
mkdir -p '\''/builds/t3_abc/0/acme/widget'\''
printf '\''\033[32;1m%s\033[0;m\n'\'' '\''Skipping Git checkout'\''
printf '\''\033[32;1m%s\033[0;m\n'\'' '\''Skipping Git submodules setup'\''
printf '\''url=%s\nusername=gitlab-ci-token\n'\'' '\''https://gitlab.example.com'\'' | git credential reject 2>/dev/null || true
' ) < /dev/null
exit 0
