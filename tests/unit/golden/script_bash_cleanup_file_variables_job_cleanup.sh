trap 'exit 1' TERM

case "$(set -o)" in *pipefail*) set -o pipefail;; esac
set -o errexit
set +o noclobber
( trap 'exit 1' TERM; eval 'printf '\''url=%s\nusername=gitlab-ci-token\n'\'' '\''https://gitlab.example.com'\'' | git credential reject 2>/dev/null || true
rm -f '\''/builds/t3_abc/0/acme/widget.tmp/gitlab_runner_env'\'' '\''/builds/t3_abc/0/acme/widget.tmp/masking.db'\'' '\''/builds/t3_abc/0/acme/widget.tmp/.gitlab-runner.ext.conf'\''
rm -f '\''/builds/t3_abc/0/acme/widget.tmp/CA_FILE'\''
if [ -d '\''/builds/t3_abc/0/acme/widget/.git'\'' ]; then
cd '\''/builds/t3_abc/0/acme/widget'\''
git clean '\''-ffdx'\''
git reset --hard
git submodule foreach --recursive '\''git clean '\''\'\'''\''-ffdx'\''\'\'''\'''\''
git submodule foreach --recursive '\''git reset --hard'\''
fi
' ) < /dev/null
exit 0
