"""llm: the transformers engine (tiny random LLaMA) and the ollama engine (missing server and
binary; a fake server; a fake `ollama` binary that the workload starts itself)."""

import json
import os
import stat
import sys

import pytest


def test_llm_transformers_tiny(wl):
    pytest.importorskip("transformers")
    res = wl.run("llm", "--engine", "transformers", "--max-new-tokens", "4", "--steps", "3",
                 "--warmup", "1", "--threads", "2")
    assert res.rc == 0, res
    rec = res.json
    wl.check(rec, "llm")
    assert (rec["unit"], rec["batch_size"], rec["engine"]) == ("tokens/s", 1, "transformers")
    assert rec["device"] == "cpu" and rec["gpus"] == 0 and rec["transformers"]
    assert rec["ttft_s"] > 0 and rec["tokens_per_s"] > 0 and rec["total_s"] > 0
    assert rec["tokens"] == 12 and rec["prompts"] == 3
    assert [p["prompt"] for p in rec["per_prompt"]] == [0, 1, 2]
    for p in rec["per_prompt"]:
        assert 0 < p["ttft_s"] <= p["total_s"] and p["tokens"] == 4
    assert abs(rec["total_s"] - sum(p["total_s"] for p in rec["per_prompt"])) < 1e-9
    assert rec["model_config"]["layers"] == 2 and rec["model_config"]["parameters"] > 0


def test_llm_transformers_serve_chunks_are_prompts(wl):
    pytest.importorskip("transformers")
    import subprocess
    proc = subprocess.run(wl.command("llm", "--serve", "--max-new-tokens", "3", "--threads", "2"),
                          input="run 2\nrun 1\n", capture_output=True, text=True, env=wl.env(),
                          timeout=120)  # EOF ends the session like quit
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [x.get("event") for x in lines] == ["ready", "chunk", "chunk", "done"]
    assert lines[1]["samples"] == 6 and lines[2]["samples"] == 3  # tokens
    assert lines[3]["prompts"] == 3 and lines[3]["tokens"] == 9


def test_llm_ollama_unavailable_exits_77(wl):
    env = wl.env(OLLAMA_HOST=f"127.0.0.1:{wl.free_port()}", PATH="/usr/bin:/bin")
    res = wl.run("llm", "--engine", "ollama", env=env)
    assert res.rc == 77, res
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("llm: cannot run here:") and "ollama" in line.lower()
    assert res.stdout == ""


def test_llm_ollama_against_fake_server(wl):
    sys.path.insert(0, str(wl.stubs))
    from fake_ollama import FakeOllama
    server = FakeOllama().start()
    try:
        env = wl.env(OLLAMA_HOST=f"http://127.0.0.1:{server.port}")
        res = wl.run("llm", "--engine", "ollama", "--model", "tiny", "--max-new-tokens", "5",
                     "--warmup", "1", env=env)
        missing = wl.run("llm", "--engine", "ollama", "--model", "huge:70b", env=env)
    finally:
        server.stop()
    assert res.rc == 0, res
    rec = res.json
    wl.check(rec, "llm")
    assert rec["engine"] == "ollama" and rec["ollama_version"] == "0.0.0-fake"
    assert rec["server_started"] is False
    assert rec["prompts"] == 8 and rec["tokens"] == 40 and rec["ttft_s"] > 0
    assert rec["value"] == pytest.approx(40 / rec["measured_s"])
    assert missing.rc == 77 and "huge:70b" in missing.stderr, missing


def test_llm_ollama_starts_its_own_server(wl, tmp_path):
    """No server answers but an `ollama` binary is on PATH: the workload starts `ollama serve`
    with OLLAMA_SCHED_SPREAD=1 and the vendor's visibility variable set to the first N GPUs."""
    binary = tmp_path / "bin" / "ollama"
    binary.parent.mkdir()
    binary.write_text(f"#!/bin/sh\nexec {sys.executable} {wl.stubs / 'fake_ollama.py'} \"$@\"\n")
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    seen = tmp_path / "env.json"
    port = wl.free_port()
    env = wl.env(OLLAMA_HOST=f"127.0.0.1:{port}", FAKE_OLLAMA_ENV_OUT=str(seen),
                 PATH=f"{binary.parent}{os.pathsep}{os.environ['PATH']}")
    res = wl.run("llm", "--engine", "ollama", "--model", "tiny", "--gpus", "2", "--gpu-vendor",
                 "amd", "--steps", "2", "--max-new-tokens", "2", env=env)
    assert res.rc == 0, res
    server_env = json.loads(seen.read_text())
    assert server_env["OLLAMA_SCHED_SPREAD"] == "1"
    assert server_env["ROCR_VISIBLE_DEVICES"] == "0,1"
    assert server_env["OLLAMA_HOST"] == f"127.0.0.1:{port}"
    rec = res.json
    assert rec["server_started"] is True and rec["gpus"] == 2 and rec["tokens"] == 4


def test_ollama_helpers():
    from workloads.llm import ollama_url, visibility_env
    assert ollama_url({}) == "http://127.0.0.1:11434"
    assert ollama_url({"OLLAMA_HOST": "0.0.0.0"}) == "http://127.0.0.1:11434"
    assert ollama_url({"OLLAMA_HOST": "https://box:8080/"}) == "https://box:8080"
    assert visibility_env("nvidia", 3) == {"CUDA_VISIBLE_DEVICES": "0,1,2"}
    assert visibility_env("amd", 0) == {"ROCR_VISIBLE_DEVICES": "-1"}
