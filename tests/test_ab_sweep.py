"""`kveval ab` with several candidates against one pool (tests/ab_server.py): one start per
setup, one gate each, the sweep's page and exit, a candidate added later, servers side by
side (`--parallel`, `{slot}`), and every bad sweep input one line and exit 2."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_ab import Q8, alive, command, environment, last_line, pids, sent, serve, write_suite

from kveval.judge.sweep import Costs, Row, row, sweep_exit
from kveval.show.sweep_view import blocks, cells

Q4 = "--cache-type-k q4_0 --cache-type-v q4_0"


def sweep(tmp_path: Path, *args: str, serve_cmd: str | None = None,
          timeout: float = 180) -> subprocess.CompletedProcess[str]:
    cmd = command(tmp_path, write_suite(tmp_path, 40), *args, serve_cmd=serve_cmd,
                  candidate=f"q8={Q8}")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=environment())


def test_each_candidate_is_gated_against_one_pool(tmp_path: Path) -> None:
    done = sweep(tmp_path, "--candidate", f"q4={Q4}", "--json")
    assert done.returncode == 0, done.stderr
    assert len(pids(tmp_path)) == 4  # baseline, noise1, q8, q4: not 2 x 3
    data = json.loads((tmp_path / "ab" / "gate.json").read_text())
    assert data == json.loads(done.stdout)
    assert data["command"] == "ab" and data["exit_code"] == 0
    assert data["verdict"] == "PASS: q8, q4"
    q8, q4 = data["candidates"]
    assert (q8["name"], q4["name"]) == ("q8", "q4")
    assert q8["gate"]["candidate"]["label"] == "q8" and q8["gate"]["command"] == "gate"
    assert q8["bought"]["kv_bytes_per_token"]["ratio"] == pytest.approx(34 / 64, rel=0.01)
    assert q4["bought"]["kv_bytes_per_token"]["ratio"] == pytest.approx(18 / 64, rel=0.01)
    page = (tmp_path / "ab" / "report.html").read_text()
    assert 'href="q8.html"' in page and 'href="q4.html"' in page and "PASS" in page
    assert "kveval: PASS" in (tmp_path / "ab" / "q4.html").read_text()


def test_a_candidate_added_later_starts_only_its_server(tmp_path: Path) -> None:
    assert sweep(tmp_path).returncode == 0
    before = len(pids(tmp_path))
    done = sweep(tmp_path, "--candidate", f"q4={Q4}")
    assert done.returncode == 0, done.stderr
    assert len(pids(tmp_path)) == before + 1
    assert done.stderr.count("finished on file; not started") == 3
    q4_row = next(line for line in done.stdout.splitlines() if line.lstrip().startswith("q4"))
    assert "(prompts)" in q4_row  # each worst-of figure names its task
    changed = sweep(tmp_path, "--candidate", f"q4={Q8} --latency 0")
    assert changed.returncode == 2
    assert "--candidate q4=" in last_line(changed.stderr) and "(on file: " in last_line(
        changed.stderr)


def test_servers_side_by_side_each_hold_a_slot(tmp_path: Path) -> None:
    cmd = serve(tmp_path).replace(f"--pids {tmp_path / 'pids'}",
                                  f"--pids {tmp_path / 'pids'}-{{slot}}")
    done = sweep(tmp_path, "--candidate", f"q4={Q4}", "--parallel", "2", serve_cmd=cmd)
    assert done.returncode == 0, done.stderr
    slots = [path.read_text().split() for path in sorted(tmp_path.glob("pids-*"))]
    assert len(slots) == 2 and sum(map(len, slots)) == 4
    assert len(sent(tmp_path)) == 4 * 40
    header = json.loads((tmp_path / "ab" / "noise1.jsonl").open().readline())
    assert "{slot}" in header["setup"]["server_command"]  # the setup, not one start's slot


def test_a_server_that_never_answers_side_by_side_stops_them_all(tmp_path: Path) -> None:
    done = sweep(tmp_path, "--candidate", "q4=--fault never", "--parallel", "4",
                 "--ready-timeout", "4")
    assert done.returncode == 2
    assert "did not answer on port" in last_line(done.stderr)
    assert "Traceback" not in done.stderr
    time.sleep(0.5)
    assert pids(tmp_path) and not any(alive(pid) for pid in pids(tmp_path))


def test_sigterm_side_by_side_stops_every_server(tmp_path: Path) -> None:
    cmd = command(tmp_path, write_suite(tmp_path, 40), "--parallel", "3",
                  serve_cmd=serve(tmp_path, "--latency 0.05"), candidate=f"q8={Q8}")
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=environment())
    deadline = time.monotonic() + 60
    while len(sent(tmp_path)) < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=90)
    assert process.returncode == 143, err
    assert "interrupted (SIGTERM)" in last_line(err)
    assert not any(alive(pid) for pid in pids(tmp_path))


def test_a_sweep_file_names_its_candidates(tmp_path: Path) -> None:
    found = tmp_path / "sweep.toml"
    found.write_text(f'[q4]\nargs = "{Q4}"\n\n[q4-slow]\nargs = ["--cache-type-k", "q4_0"]\n'
                     'env = { OMP_NUM_THREADS = "1", PGPASSWORD = "hunter2secret" }\n')
    done = sweep(tmp_path, "--sweep", str(found), "--dry-run", "--teacher-force", "off")
    assert done.returncode == 0, done.stderr
    assert "start 4: q4: " in done.stdout and "start 5: q4-slow: OMP_NUM_THREADS=1 " \
        "PGPASSWORD=scrypt:" in done.stdout
    assert "hunter2secret" not in done.stdout
    assert "a page per candidate" in done.stdout


def named_semaphores(pid: int) -> list[str]:
    """The named POSIX semaphores a process has open: each maps /dev/shm/sem.NAME (an
    anonymous one, unlinked as soon as made, maps it "(deleted)" and no tracker counts it)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return []
    return [line.split()[5] for line in maps.splitlines()
            if "/dev/shm/sem." in line and not line.endswith("(deleted)")]


def test_side_by_side_holds_no_named_semaphore_for_the_resource_tracker(tmp_path: Path) -> None:
    """A named semaphore is what multiprocessing's resource tracker warns of, after kveval's
    last line, when it finds one left at exit: ab --parallel holds none."""
    from test_ab_watchdog import wait_until

    cmd = command(tmp_path, write_suite(tmp_path, 40), "--parallel", "2",
                  serve_cmd=serve(tmp_path, "--hold-at 10"), candidate=f"q8={Q8}")
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=environment())
    try:
        assert wait_until(lambda: len(sent(tmp_path)) >= 10, 60)  # held: children mid-run
        family = [process.pid, *(int(p) for p in subprocess.run(
            ["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split())]
        assert len(family) >= 3  # kveval ab, its resource tracker, a child per start
        assert [name for pid in family for name in named_semaphores(pid)] == []
    finally:
        (tmp_path / "count.release").touch()
        process.wait(timeout=120)


@pytest.mark.parametrize(("args", "words"), [
    (("--candidate", f"q8={Q4}"), "candidate 'q8' is given twice"),
    (("--candidate", "baseline=--x"), "--candidate 'baseline': a candidate's name"),
    (("--candidate", "q4=--y", "--candidate-env", "A=1"), "--candidate-env 'A=1': name the "
                                                           "candidate"),
    (("--candidate", f"q4={Q8}"), "candidate 'q4' must change something against another"),
    (("--sweep", "{missing}"), "cannot read"),
    (("--sweep", "{bad}"), "not a TOML file"),
    (("--sweep", "{odd}"), "`args` is a string or a list of strings"),
])
def test_a_bad_sweep_is_one_line(tmp_path: Path, args: tuple[str, ...], words: str) -> None:
    (tmp_path / "bad.toml").write_text("[q4\n")
    (tmp_path / "odd.toml").write_text("[q4]\nargs = 3\n")
    paths = {"missing": str(tmp_path / "none.toml"), "bad": str(tmp_path / "bad.toml"),
             "odd": str(tmp_path / "odd.toml")}
    done = sweep(tmp_path, *(a.format(**paths) for a in args), "--dry-run")
    assert done.returncode == 2, done.stderr
    assert words in last_line(done.stderr) and "Traceback" not in done.stderr
    assert not pids(tmp_path)


def _row(name: str, code: int) -> Row:
    return Row(name, {0: "pass", 1: "regression"}.get(code, "cannot judge"), code,
               Costs(None, None, None, False, ()), {})


def _task(name: str, lost: float, changed: int) -> dict[str, Any]:
    return {"task": name, "accuracy": {"difference": -lost},
            "drift": {"candidate": {"pairs": 10, "changed": changed},
                      "noise": {"pairs": 10, "changed": 0}}}


def test_each_worst_of_figure_names_its_task() -> None:
    gate = {"verdict": "regression", "exit_code": 1,
            "tasks": [_task("gsm8k", 0.4, 9), _task("prompts", 0.0, 10)]}
    found = row("q4", gate)
    assert found.costs.worst == {"points_lost": "gsm8k", "drift": "prompts"}
    text = cells(found)
    assert text[2] == "+40.0 (gsm8k)" and text[3] == "+100.0% (prompts)" and text[4] == "-"


def test_a_candidates_speed_caution_stands_under_the_sweep() -> None:
    """The trade's caution (runs timed under different loads) beside the sweep's ratios."""
    load = {"loads": {"baseline": 6.0, "noise1": 5.9, "q4": 2.0}, "apart": 4.0, "cpus": 2}
    ratio = {"output_tokens_per_s": {"ratio": 1.7, "noise_range": [0.98, 1.02],
                                     "setup_runs": 2}}
    gate = {"verdict": "pass", "exit_code": 0, "tasks": [],
            "trade": {"ratio": ratio, "speed_caveats": {"load": load}}}
    text = "\n".join(str(b) for b in blocks([row("q4", gate), row("q8", {"verdict": "pass"})],
                                            "PASS", {}))
    assert "q4: speed caution: the runs were timed under different host loads (1-minute load " \
           "average baseline 6.0, noise1 5.9, q4 2.0, on 2 CPUs; 4.0 apart)" in text
    assert "q8: speed caution" not in text


@given(st.lists(st.sampled_from([0, 1, 2]), min_size=1, max_size=6))
def test_the_sweep_exits_on_its_worst_candidate(codes: list[int]) -> None:
    code, words = sweep_exit([_row(f"c{i}", c) for i, c in enumerate(codes)])
    assert code == (1 if 1 in codes else 2 if 2 in codes else 0)
    named = [f"c{i}" for i, c in enumerate(codes) if c == code]
    assert all(name in words for name in named)


def test_kill_9_side_by_side_leaves_no_server_and_the_rerun_resumes(tmp_path: Path) -> None:
    from test_ab_watchdog import gone, wait_until

    suite = write_suite(tmp_path, 40)
    cmd = command(tmp_path, suite, "--parallel", "3",
                  serve_cmd=serve(tmp_path, "--latency 0.05"), candidate=f"q8={Q8}")
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=environment())
    try:
        assert wait_until(lambda: len(sent(tmp_path)) >= 20, 60)
    finally:
        process.kill()
        process.wait()
    servers = pids(tmp_path)
    assert len(servers) >= 2  # side by side
    assert wait_until(lambda: all(gone(pid) for pid in servers), 60), "a server outlived it"
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=environment())
    assert done.returncode == 0, done.stderr
    assert all(gone(pid) for pid in pids(tmp_path))


@pytest.mark.parametrize(("args", "words"), [
    (("--candidate", "q8/fast=--x"), "--candidate 'q8/fast': a candidate's name"),
    (("--candidate", "=--x"), "--candidate '': a candidate's name"),
    (("--candidate", "Q8=--a"), "candidate 'Q8' is given twice"),
    (("--candidate", "q4=--y", "--candidate-env", "q5:A=1"), "no candidate 'q5'"),
    (("--candidate", "q4=--y\0z"), "a NUL character cannot be passed"),
])
def test_a_candidate_name_or_value_that_cannot_be_is_one_line(
        tmp_path: Path, args: tuple[str, ...], words: str) -> None:
    if "\0" in "".join(args):
        args = tuple(a.replace("\0", "") for a in args)  # argv cannot carry NUL: a sweep can
        found = tmp_path / "nul.toml"
        found.write_text('[q4]\nargs = ["--y\\u0000z"]\n')
        args = ("--sweep", str(found))
        words = "`args` is a string or a list of strings"
    done = sweep(tmp_path, *args, "--dry-run")
    assert done.returncode == 2, done.stderr
    assert words in last_line(done.stderr) and "Traceback" not in done.stderr


def test_a_secret_before_the_program_is_masked_in_every_form(tmp_path: Path) -> None:
    secret = "ENVUSECRETccc333"
    for prefix in (f"env -u NOTHING API_KEY={secret}", f"API_KEY={secret}"):
        done = sweep(tmp_path, "--dry-run", serve_cmd=f"{prefix} {serve(tmp_path)}")
        assert secret not in done.stdout + done.stderr, prefix
