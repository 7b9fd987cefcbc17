trap 'exit 1' TERM

case "$(set -o)" in *pipefail*) set -o pipefail;; esac
set -o errexit
set +o noclobber
( trap 'exit 1' TERM; eval 'echo "Running on $(hostname)..."
rm -f '\''/builds/t3_abc/0/acme/widget.tmp/gitlab_runner_env'\'' '\''/builds/t3_abc/0/acme/widget.tmp/masking.db'\''
' ) < /dev/null
exit 0
