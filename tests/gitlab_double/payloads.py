"""Realistic job payloads (the 201 body of POST /jobs/request, protocol.md 4.5, 4.6).

Why it exists: the daemon's tests need jobs that look like what Rails
sends (steps, variables with their flags, git_info with the job token in
the clone URL, the failure reasons the server accepts), built from the
few things a test cares about, and the same from a JSON pipeline file
(standalone mode).  job_payload() builds one; bind_identity() puts a
job's id and token everywhere Rails puts them (add_job calls it, so a
payload never disagrees with the job it belongs to).
"""
import hashlib
import re
import secrets
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

DEFAULT_SERVER_URL = "https://gitlab.example.com"
ZERO_SHA = "0" * 40
JOB_TOKEN_USER = "gitlab-ci-token"

# Rails' Ci::Build#features failure_reasons: every key of the
# commit_status failure_reason enum (protocol.md 5.6, newest copy).
FAILURE_REASONS = (
    "unknown_failure", "script_failure", "api_failure", "stuck_or_timeout_failure",
    "runner_system_failure", "missing_dependency_failure", "runner_unsupported",
    "stale_schedule", "job_execution_timeout", "archived_failure", "unmet_prerequisites",
    "scheduler_failure", "data_integrity_failure", "forward_deployment_failure",
    "user_blocked", "project_deleted", "ci_quota_exceeded", "pipeline_loop_detected",
    "no_matching_runner", "trace_size_exceeded", "builds_disabled",
    "environment_creation_failure", "deployment_rejected", "failed_outdated_deployment_job",
    "job_execution_server_timeout", "stuck_pending_with_matching_runners",
    "stuck_pending_no_matching_runners", "no_updates_running", "no_updates_canceling",
    "server_timeout_running", "server_timeout_canceling", "runner_configuration_error",
    "runner_external_dependency_failure", "runner_interrupted",
    "protected_environment_failure", "insufficient_bridge_permissions",
    "downstream_bridge_project_not_found", "invalid_bridge_trigger",
    "upstream_bridge_project_not_found", "insufficient_upstream_permissions",
    "bridge_pipeline_is_child_pipeline", "downstream_pipeline_creation_failed",
    "secrets_provider_not_found", "reached_max_descendant_pipelines_depth",
    "ip_restriction_failure", "reached_max_pipeline_hierarchy_size",
    "reached_downstream_pipeline_trigger_rate_limit", "duo_workflow_not_allowed",
    "job_router_failure", "job_token_expired", "downstream_project_trigger_resolved_to_empty")

# Top-level fields of the job response (4.5) a caller may set through **extra.
TOP_LEVEL = frozenset((
    "id", "token", "allow_git_fetch", "job_info", "git_info", "runner_info", "variables",
    "steps", "hooks", "image", "services", "artifacts", "cache", "credentials",
    "dependencies", "features", "secrets", "inputs", "run", "policy_options",
    "suspend_options"))
VARIABLE_FLAGS = ("public", "masked", "file", "raw")


def new_job_token():
    return "glcbt-64_" + secrets.token_urlsafe(15)


def variable(key, value, public=True, masked=False, file=False, raw=False):
    """One variable as Rails serialises it: file and raw only when true (4.6)."""
    if not isinstance(key, str) or not isinstance(value, str):
        raise TypeError(f"variable {key!r}: key and value must be strings")
    out = {"key": key, "value": value, "public": bool(public), "masked": bool(masked)}
    if file:
        out["file"] = True
    if raw:
        out["raw"] = True
    return out


def normalize_variables(variables):
    """A list of variable dicts from a list of dicts or a name -> value mapping.

    A mapping value is either the value string or a dict with "value" and
    any of the flags public/masked/file/raw (public defaults to true).
    """
    if variables is None:
        return []
    if isinstance(variables, Mapping):
        items = []
        for key, spec in variables.items():
            spec = dict(spec) if isinstance(spec, Mapping) else {"value": spec}
            items.append(dict(spec, key=key))
    else:
        items = [dict(v) for v in variables]
    out = []
    for item in items:
        unknown = set(item) - {"key", "value", *VARIABLE_FLAGS}
        if unknown:
            raise ValueError(f"variable {item.get('key')!r}: unknown fields {sorted(unknown)}")
        out.append(variable(item["key"], item["value"],
                            **{f: item[f] for f in VARIABLE_FLAGS if f in item}))
    return out


def with_job_token(url, token):
    """An http(s) clone URL with gitlab-ci-token:<token>@ userinfo; other URLs as-is."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{JOB_TOKEN_USER}:{token}@{host}"))


def _predefined(name, stage, project, project_id, ref, sha, pipeline_id, server_url, repo_url):
    """The predefined variables Rails sends (a real job has ~80; these matter here)."""
    host = urlsplit(server_url).hostname or ""
    pub = [("CI", "true"), ("GITLAB_CI", "true"), ("CI_SERVER_URL", server_url),
           ("CI_SERVER_HOST", host), ("CI_API_V4_URL", server_url + "/api/v4"),
           ("CI_JOB_ID", "0"), ("CI_JOB_NAME", name), ("CI_JOB_STAGE", stage),
           ("CI_JOB_URL", f"{server_url}/{project}/-/jobs/0")]
    out = [variable(k, v) for k, v in pub]
    out += [variable("CI_JOB_TOKEN", "", public=False, masked=True),
            variable("CI_REPOSITORY_URL", repo_url, public=False)]
    tail = [("CI_PROJECT_ID", str(project_id)), ("CI_PROJECT_PATH", project),
            ("CI_PROJECT_NAME", project.rsplit("/", 1)[-1]), ("CI_COMMIT_SHA", sha),
            ("CI_COMMIT_REF_NAME", ref), ("CI_COMMIT_REF_SLUG", ref_slug(ref)),
            ("CI_PIPELINE_ID", str(pipeline_id))]
    return out + [variable(k, v) for k, v in tail]


def ref_slug(ref):
    """Rails' slugify: lower case, [^a-z0-9] runs to '-', at most 63, no '-' at the ends."""
    slug = re.sub(r"[^a-z0-9]", "-", ref.lower())[:63]
    return slug.strip("-")


def job_payload(script=("echo hello",), after_script=(), variables=None, timeout=3600,
                name="test", stage="test", project="group/project", project_id=1,
                ref="main", sha=None, refspecs=None, depth=20, repo_url=None,
                server_url=DEFAULT_SERVER_URL, pipeline_id=1, allow_failure=False,
                allow_git_fetch=True, id=1, token=None, **extra):
    """A job response body shaped like Rails' (protocol.md 4.6).

    script / after_script: lists of shell lines (steps "script", when
    on_success, and "after_script", when always, the latter only when
    given).  variables: see normalize_variables; they follow the
    predefined ones (the last occurrence of a key wins).  repo_url
    defaults to <server_url>/<project>.git; http(s) URLs get the job
    token as userinfo.  depth 0 means a full clone (no GIT_DEPTH).
    **extra sets other top-level fields of 4.5 (artifacts, cache, image,
    hooks, ...); anything else is a TypeError, so a typo in a pipeline
    file does not pass silently.
    """
    unknown = set(extra) - TOP_LEVEL
    if unknown:
        raise TypeError(f"job_payload: unknown arguments {sorted(unknown)}")
    sha = sha or hashlib.sha1(f"{project}@{ref}".encode()).hexdigest()
    repo_url = repo_url or f"{server_url}/{project}.git"
    if refspecs is None:
        refspecs = [f"+refs/pipelines/{pipeline_id}:refs/pipelines/{pipeline_id}",
                    f"+refs/heads/{ref}:refs/remotes/origin/{ref}"]
    variables_out = _predefined(name, stage, project, project_id, ref, sha, pipeline_id,
                                server_url, repo_url)
    if depth:
        variables_out.append(variable("GIT_DEPTH", str(depth)))
    variables_out += normalize_variables(variables)
    steps = [{"name": "script", "script": list(script), "timeout": timeout,
              "when": "on_success", "allow_failure": bool(allow_failure)}]
    if after_script:
        steps.append({"name": "after_script", "script": list(after_script),
                      "timeout": timeout, "when": "always", "allow_failure": True})
    body = {
        "id": id, "token": "", "allow_git_fetch": bool(allow_git_fetch),
        "job_info": {"id": id, "name": name, "stage": stage, "project_id": project_id,
                     "project_name": project.rsplit("/", 1)[-1],
                     "project_full_path": project, "namespace_id": 1,
                     "root_namespace_id": 1, "organization_id": 1, "user_id": 1,
                     "time_in_queue_seconds": 0.5,
                     "project_jobs_running_on_instance_runners_count": "0",
                     "queue_size": 0, "queue_depth": 0},
        "git_info": {"repo_url": repo_url, "ref": ref, "sha": sha, "before_sha": ZERO_SHA,
                     "ref_type": "branch", "refspecs": list(refspecs), "depth": depth,
                     "repo_object_format": "sha1", "protected": False},
        "runner_info": {"timeout": timeout, "runner_session_url": None},
        "variables": variables_out,
        "steps": steps,
        "hooks": [], "image": None, "services": [], "artifacts": [], "cache": [],
        "credentials": [], "dependencies": [],
        "features": {"trace_sections": True, "failure_reasons": list(FAILURE_REASONS)},
    }
    body.update(extra)
    return bind_identity(body, id, token or new_job_token())


def _set_variable(variables, key, value, **flags):
    """Replace every occurrence of key (keeping its flags), or prepend it."""
    hits = [v for v in variables if isinstance(v, dict) and v.get("key") == key]
    for v in hits:
        v["value"] = value
        v.update(flags)
    if not hits:
        variables.insert(0, variable(key, value, **flags))


def bind_identity(body, id, token):
    """Put the job id and token wherever Rails puts them; returns body (changed in place).

    id/token at the top, job_info.id, CI_JOB_ID, CI_JOB_URL, CI_JOB_TOKEN
    (masked), CI_REGISTRY_PASSWORD (if present), the clone URL's userinfo
    (git_info.repo_url, CI_REPOSITORY_URL), registry credentials of
    gitlab-ci-token and dependency tokens.
    """
    body["id"], body["token"] = id, token
    if isinstance(body.get("job_info"), dict):
        body["job_info"]["id"] = id
    git = body.get("git_info")
    if isinstance(git, dict) and isinstance(git.get("repo_url"), str):
        git["repo_url"] = with_job_token(git["repo_url"], token)
    variables = body.setdefault("variables", [])
    _set_variable(variables, "CI_JOB_TOKEN", token, public=False, masked=True)
    _set_variable(variables, "CI_JOB_ID", str(id))
    for v in variables:
        if not isinstance(v, dict) or not isinstance(v.get("value"), str):
            continue
        if v.get("key") == "CI_REGISTRY_PASSWORD":
            v["value"] = token
        elif v.get("key") == "CI_REPOSITORY_URL":
            v["value"] = with_job_token(v["value"], token)
        elif v.get("key") == "CI_JOB_URL" and "/-/jobs/" in v["value"]:
            v["value"] = v["value"].rsplit("/-/jobs/", 1)[0] + f"/-/jobs/{id}"
    for cred in body.get("credentials") or []:
        if isinstance(cred, dict) and cred.get("username") == JOB_TOKEN_USER:
            cred["password"] = token
    for dep in body.get("dependencies") or []:
        if isinstance(dep, dict) and "token" in dep:
            dep["token"] = token
    return body
