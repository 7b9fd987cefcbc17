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
export GLR_EXT_GIT_CONFIG_PATH='\''/builds/t3_abc/0/acme/widget.tmp/.gitlab-runner.ext.conf'\''
printf '\''\033[32;1m$ %s\033[0;m\n'\'' '\''echo pre '\''\'\'''\''hook'\''\'\'''\'''\''
echo pre '\''hook'\''
_runner_exit_code=$?; if [ $_runner_exit_code -ne 0 ]; then exit $_runner_exit_code; fi
rm -f '\''/builds/t3_abc/0/acme/widget/.git/index.lock'\'' '\''/builds/t3_abc/0/acme/widget/.git/shallow.lock'\'' '\''/builds/t3_abc/0/acme/widget/.git/HEAD.lock'\'' '\''/builds/t3_abc/0/acme/widget/.git/hooks/post-checkout'\'' '\''/builds/t3_abc/0/acme/widget/.git/config.lock'\''
if [ -d '\''/builds/t3_abc/0/acme/widget/.git/refs'\'' ]; then find '\''/builds/t3_abc/0/acme/widget/.git/refs'\'' -name '\''*.lock'\'' -type f -exec rm -f {} +; fi
rm -rf '\''/builds/t3_abc/0/acme/widget.tmp/git-template'\''
mkdir -p '\''/builds/t3_abc/0/acme/widget.tmp/git-template'\''
git config --file '\''/builds/t3_abc/0/acme/widget.tmp/git-template/config'\'' init.defaultBranch none
git config --file '\''/builds/t3_abc/0/acme/widget.tmp/git-template/config'\'' fetch.recurseSubmodules false
git config --file '\''/builds/t3_abc/0/acme/widget.tmp/git-template/config'\'' credential.interactive never
git config --file '\''/builds/t3_abc/0/acme/widget.tmp/git-template/config'\'' gc.autoDetach false
git config --file '\''/builds/t3_abc/0/acme/widget.tmp/git-template/config'\'' include.path "$GLR_EXT_GIT_CONFIG_PATH"
(umask 077 && rm -f "$GLR_EXT_GIT_CONFIG_PATH" && printf '\''%s'\'' '\''[credential "https://gitlab.example.com"]
	helper = ""
	helper = "!f(){ if [ \"$1\" = get ]; then echo \"password=${CI_JOB_TOKEN}\"; fi; }; f"
	username = "gitlab-ci-token"
[http "https://gitlab.example.com"]
	sslCAInfo = "/builds/t3_abc/0/acme/widget.tmp/CA_FILE"
'\'' > "$GLR_EXT_GIT_CONFIG_PATH")
git init -q --template '\''/builds/t3_abc/0/acme/widget.tmp/git-template'\'' '\''/builds/t3_abc/0/acme/widget'\''
cd '\''/builds/t3_abc/0/acme/widget'\''
if git remote add origin '\''https://gitlab.example.com/acme/widget.git'\'' >/dev/null 2>&1; then
  printf '\''\033[32;1m%s\033[0;m\n'\'' '\''Created fresh repository.'\''
else
  git remote set-url origin '\''https://gitlab.example.com/acme/widget.git'\''
fi
printf '\''\033[32;1m%s\033[0;m\n'\'' '\''Fetching changes with git depth set to 20...'\''
_runner_attempt=1
until git -c include.path="$GLR_EXT_GIT_CONFIG_PATH" -c '\''http.userAgent=gitlab-runner 17.0.0 linux/amd64'\'' fetch origin --no-recurse-submodules '\''+refs/heads/main:refs/remotes/origin/main'\'' '\''+refs/tags/*:refs/tags/*'\'' --depth 20 '\''--prune'\'' '\''--quiet'\''; do
  _runner_exit_code=$?
  if [ "$_runner_attempt" -ge 2 ]; then exit $_runner_exit_code; fi
  _runner_attempt=$((_runner_attempt + 1))
  printf '\''\033[0;33mWARNING: %s\033[0;m\n'\'' '\''Fetch failed, retrying...'\''
done
printf '\''\033[32;1m%s\033[0;m\n'\'' '\''Checking out 01234567 as detached HEAD (ref is main)...'\''
git -c submodule.recurse=false checkout -f -q '\''0123456789abcdef0123456789abcdef01234567'\''
git clean '\''-ffdx'\''
printf '\''\033[32;1m%s\033[0;m\n'\'' '\''Updating/initializing submodules recursively with git depth set to 1...'\''
git submodule sync --recursive -- '\''sub1'\'' '\'''\''\'\'''\'':(exclude)sub2'\''\'\'''\'''\''
git -c include.path="$GLR_EXT_GIT_CONFIG_PATH" submodule update --init --recursive --depth 1 '\''--remote'\'' -- '\''sub1'\'' '\'''\''\'\'''\'':(exclude)sub2'\''\'\'''\'''\''
git submodule foreach --recursive '\''git clean '\''\'\'''\''-ffdx'\''\'\'''\'''\''
printf '\''\033[32;1m$ %s\033[0;m\n'\'' '\''echo post'\''
echo post
_runner_exit_code=$?; if [ $_runner_exit_code -ne 0 ]; then exit $_runner_exit_code; fi
printf '\''url=%s\nusername=gitlab-ci-token\n'\'' '\''https://gitlab.example.com'\'' | git credential reject 2>/dev/null || true
' ) < /dev/null
exit 0
