"""The CLI matrix: every command run as a user types it (the real `main` with the user's argv and an explicit
environment, in process: tests/clirun.py), for its happy path and each documented exit (0 ok, 1 runtime
failure, 2 bad input or usage — one line naming the file or variable and the field, no traceback — 3 route
not verified). The real entry point's own exit codes and stderr are proven in a fresh interpreter too:
`python -m research_dispatch check` (test_config.py), click's usage errors (cli/test_help.py) and the
installed wheel's console script (adopt/test_installed.py).

Where each cell is proven (tests/cli adds only the cells that were missing):

command     exit  tests
check       0     tools/test_toolset_config.py, adopt/test_installed.py (the installed wheel)
            2     test_config.py, reliability/test_bad_input.py; cli/test_inputs.py (a pyproject field,
                  one line per bad topic file)
plan        0     bounds/test_exit_contract.py (`--topics ""`), the workflow runs; cli/test_inputs.py
                  (`--github-output`: stdout and $GITHUB_OUTPUT)
            2     bounds/test_exit_contract.py (GITHUB_OUTPUT, empty selections); cli/test_inputs.py (an
                  unknown topic)
research    0     bounds/test_file_modes.py, bounds/test_report_cap.py; cli/test_legs.py (`--export`)
            1     bounds/test_ctrl_c.py (interrupted); cli/test_legs.py (a failed leg)
            2     bounds/test_exit_contract.py (`--export`, keys); cli/test_inputs.py (unknown topic, a
                  missing gateway or search key)
            3     cli/test_legs.py (another model served)
verify      0     test_gateway_wire.py (trusted self-reported); cli/test_legs.py (`--online`)
            2     bounds/test_exit_contract.py (damaged call logs and front matter), test_gateway_wire.py
                  (`--online` on an openai-compatible gateway); cli/test_inputs.py (no reports),
                  cli/test_legs.py (`--online` without a key)
            3     test_gateway_wire.py (self-reported); cli/test_legs.py (model fallback, and `--online`
                  catching a call log that lies)
synthesize  0     synthesis/test_scenarios.py, reliability/test_refresh_rules.py
            1     reliability/test_synthesis_faults.py (time limit, nothing extracted)
            2     bounds/test_exit_contract.py (GITHUB_STEP_SUMMARY); cli/test_inputs.py (no reports),
                  cli/test_legs.py (no key)
publish     0     reliability/test_never_lose_work.py; cli/test_publish.py (`--dry-run`, `--no-push`,
                  push and PR, a second publish updating it)
            1     cli/test_publish.py (a person's commit on the refresh branch: commented, not overwritten)
            2     reliability/test_refresh_rules.py (a hand-edited report), bounds/test_exit_contract.py
                  (token, API URL, summary file); cli/test_inputs.py (no token), cli/test_publish.py (a bad
                  branch name)
collect     0     the workflow runs (tests/workflows); cli/test_legs.py (an exported leg)
            1     bounds/test_exit_contract.py (damaged files rejected)
            2     bounds/test_exit_contract.py (empty selection); cli/test_inputs.py (no such folder)
run         0     bounds/test_fresh_interpreter.py, reliability/test_never_lose_work.py
            1     bounds/test_exit_contract.py (unreachable remote, foreign commits), bounds/test_ctrl_c.py
            2     bounds/test_exit_contract.py (preflight: base branch, output directories, keys)
            3     reliability/test_refresh_rules.py (another model served)
demo        0     adopt/test_installed.py, adopt/test_demo_repo.py
            2     adopt/test_installed.py (`--repo` without topics); cli/test_inputs.py (a `--dir` it did
                  not make)
init        0, 2  adopt/test_init.py, adopt/test_init_faults.py, adopt/test_installed.py
--help, --version, usage errors: cli/test_help.py (every command; the FIXED flags of docs/ARCHITECTURE.md)

`scripts/dev/test_share.py` measures the share of all test items that still run the CLI as a process.
"""
