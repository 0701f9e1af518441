"""llm: LLM serving measured as in "Evaluating the Performance of Containerized Workloads on
Frontier" (CUG 2025): the time to answer a fixed set of prompts with 0, 1, 2 ... GPUs.

Engines:
  ollama        the paper's engine, over Ollama's HTTP API (OLLAMA_HOST); starts `ollama serve`
                itself (OLLAMA_SCHED_SPREAD=1, first N GPUs visible) when no server answers.
  transformers  a small LLaMA-architecture model with random weights built from LlamaConfig
                (no download); prompts are UTF-8 bytes as token ids; greedy decoding.
One step = one prompt answered (the prompts are used in order, cyclically)."""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

from workloads import common
from workloads.prompts import PROMPTS

NAME = "llm"
BOS, EOS, PAD = 256, 257, 258  # byte-level tokens 0..255, then specials


class LlmRunner(common.Runner):
    def __init__(self, answer, max_new_tokens):
        self.answer = answer            # prompt -> (ttft_s, total_s, tokens)
        self.max_new_tokens = max_new_tokens
        self.index = 0
        self.records = []
        self.cleanup = []

    def step(self):
        i = self.index % len(PROMPTS)
        self.index += 1
        ttft, total, tokens = self.answer(PROMPTS[i])
        self.records.append({"prompt": i, "ttft_s": ttft, "total_s": total, "tokens": tokens})
        return tokens

    def begin_measure(self):  # the measured prompts start again at the first one
        self.records = []
        self.index = 0

    def extra(self):
        r = self.records
        total = sum(p["total_s"] for p in r)
        tokens = sum(p["tokens"] for p in r)
        return {"ttft_s": sum(p["ttft_s"] for p in r) / len(r) if r else None,
                "tokens_per_s": tokens / total if total > 0 else None,
                "total_s": total, "tokens": tokens, "prompts": len(r), "per_prompt": r}

    def close(self):
        while self.cleanup:
            self.cleanup.pop()()


# ---------------------------------------------------------------- transformers engine

def transformers_engine(args, record):
    torch = common.setup_torch(args)
    try:
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
    except Exception as e:
        raise common.CannotRun(f"transformers is not importable ({type(e).__name__}: {e})") from None
    gpus = args.gpus
    if gpus is None:
        gpus = 1 if args.device != "cpu" and torch.cuda.is_available() else 0
        if args.device == "cuda" and gpus == 0:
            common.resolve_device(torch, "cuda")  # raises CannotRun
    if gpus > 0 and (not torch.cuda.is_available() or torch.cuda.device_count() < gpus):
        have = torch.cuda.device_count() if torch.cuda.is_available() else 0
        raise common.CannotRun(f"--gpus {gpus} requested but {have} GPU(s) are visible")
    dtype = getattr(torch, args.dtype)
    config = LlamaConfig(
        vocab_size=args.vocab_size, hidden_size=args.hidden_size,
        intermediate_size=args.intermediate_size or 4 * args.hidden_size,
        num_hidden_layers=args.layers, num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads or args.heads,
        max_position_embeddings=max(1024, 512 + args.max_new_tokens),
        bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(config).to(dtype).eval()
    if gpus == 0:
        device = torch.device("cpu")
    elif gpus == 1:
        device = torch.device("cuda", 0)
        model = model.to(device)
    else:
        model, device = spread_over_gpus(torch, model, gpus)

    def sync():
        if device.type == "cuda":
            for i in range(gpus):
                torch.cuda.synchronize(i)

    def answer(prompt):
        ids = torch.tensor([[BOS] + list(prompt.encode("utf-8"))], device=device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model(input_ids=ids, use_cache=True)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            sync()
            ttft = time.perf_counter() - t0
            past = out.past_key_values
            for _ in range(args.max_new_tokens - 1):
                out = model(input_ids=nxt, past_key_values=past, use_cache=True)
                past = out.past_key_values
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            sync()
        return ttft, time.perf_counter() - t0, args.max_new_tokens

    record.update({
        "device": device.type, "gpus": gpus, "engine": "transformers",
        "transformers": transformers.__version__, "model": "llama-random",
        "model_config": {"hidden_size": config.hidden_size, "layers": config.num_hidden_layers,
                         "heads": config.num_attention_heads,
                         "kv_heads": config.num_key_value_heads,
                         "intermediate_size": config.intermediate_size,
                         "vocab_size": config.vocab_size, "dtype": args.dtype,
                         "parameters": sum(p.numel() for p in model.parameters())},
        "threads": torch.get_num_threads(),
    })
    return answer


def spread_over_gpus(torch, model, gpus):
    """Split the decoder layers over the first `gpus` GPUs with accelerate."""
    try:
        from accelerate import dispatch_model, infer_auto_device_map
        from accelerate.utils import get_balanced_memory
    except ImportError:
        raise common.CannotRun("--gpus > 1 with the transformers engine needs accelerate") from None
    memory = {i: torch.cuda.get_device_properties(i).total_memory for i in range(gpus)}
    no_split = ["LlamaDecoderLayer"]
    memory = get_balanced_memory(model, max_memory=memory, no_split_module_classes=no_split)
    device_map = infer_auto_device_map(model, max_memory=memory, no_split_module_classes=no_split)
    return dispatch_model(model, device_map=device_map), torch.device("cuda", 0)


# ---------------------------------------------------------------- ollama engine

def ollama_url(environ=None):
    host = (os.environ if environ is None else environ).get("OLLAMA_HOST") or "127.0.0.1:11434"
    scheme = "http"
    if "://" in host:
        scheme, host = host.split("://", 1)
    host = host.rstrip("/")
    if ":" not in host.rsplit("]", 1)[-1]:
        host += ":11434"
    if host.startswith("0.0.0.0:"):
        host = "127.0.0.1:" + host.split(":", 1)[1]
    return f"{scheme}://{host}"


def _request(url, body=None, timeout=10.0):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)


def server_up(url):
    try:
        with _request(url + "/api/version", timeout=2.0) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError, ValueError):
        return False


def gpu_vendor(requested):
    if requested != "auto":
        return requested
    if os.path.exists("/dev/kfd") or shutil.which("rocm-smi") or shutil.which("amd-smi"):
        return "amd"
    return "nvidia"


def visibility_env(vendor, gpus):
    """The variable that limits Ollama to the first `gpus` GPUs ("-1": none, i.e. CPU)."""
    var = "ROCR_VISIBLE_DEVICES" if vendor == "amd" else "CUDA_VISIBLE_DEVICES"
    return {var: ",".join(str(i) for i in range(gpus)) if gpus > 0 else "-1"}


def start_server(url, args, runner):
    binary = shutil.which("ollama")
    if binary is None:
        raise common.CannotRun(f"no Ollama server answers at {url} and there is no ollama "
                               "binary on PATH")
    env = dict(os.environ, OLLAMA_SCHED_SPREAD="1", OLLAMA_HOST=url.split("://", 1)[1])
    started = {"OLLAMA_SCHED_SPREAD": "1"}
    if args.gpus is not None:
        started.update(visibility_env(gpu_vendor(args.gpu_vendor), args.gpus))
        env.update(started)
    common.log(NAME, f"starting {binary} serve at {url} with {started}")
    proc = subprocess.Popen([binary, "serve"], env=env, stdin=subprocess.DEVNULL,
                            stdout=sys.stderr, stderr=sys.stderr)

    def stop():
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    runner.cleanup.append(stop)
    deadline = time.time() + args.server_timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise common.Failure(f"ollama serve exited with code {proc.returncode}")
        if server_up(url):
            return started
        time.sleep(0.25)
    stop()
    raise common.Failure(f"ollama serve did not answer at {url} within {args.server_timeout} s")


def ollama_engine(args, record, runner):
    url = ollama_url()
    started = None
    if not server_up(url):
        started = start_server(url, args, runner)
    try:
        with _request(url + "/api/show", {"model": args.model}) as r:
            r.read()
    except urllib.error.HTTPError as e:
        if e.code != 404:
            raise common.Failure(f"{url}/api/show: HTTP {e.code}") from None
        if not args.pull:
            raise common.CannotRun(f"model {args.model!r} is not on the Ollama server at {url} "
                                   f"(run 'ollama pull {args.model}' or pass --pull)") from None
        common.log(NAME, f"pulling {args.model}")
        with _request(url + "/api/pull", {"model": args.model, "stream": False},
                      timeout=3600) as r:
            r.read()
    with _request(url + "/api/version") as r:
        version = json.loads(r.read()).get("version")
    options = {"seed": args.seed, "temperature": 0, "num_predict": args.max_new_tokens}
    if args.threads:
        options["num_thread"] = args.threads

    def answer(prompt):
        body = {"model": args.model, "prompt": prompt, "stream": True, "options": options}
        t0 = time.perf_counter()
        ttft, tokens, chunks = None, None, 0
        with _request(url + "/api/generate", body, timeout=args.request_timeout) as r:
            for line in r:
                if not line.strip():
                    continue
                msg = json.loads(line)
                if "error" in msg:
                    raise common.Failure(f"ollama: {msg['error']}")
                if msg.get("response"):
                    chunks += 1
                    if ttft is None:
                        ttft = time.perf_counter() - t0
                if msg.get("done"):
                    tokens = msg.get("eval_count")
                    break
        total = time.perf_counter() - t0
        return (ttft if ttft is not None else total), total, tokens if tokens is not None else chunks

    record.update({"engine": "ollama", "model": args.model, "ollama_host": url,
                   "ollama_version": version, "server_started": started is not None,
                   "server_env": started, "gpus": args.gpus,
                   "device": "cpu" if args.gpus == 0 else ("gpu" if args.gpus else "server")})
    return answer


# ---------------------------------------------------------------- command line

def make_parser():
    p = common.parser(NAME, steps=len(PROMPTS), warmup=1)
    p.add_argument("--engine", choices=("transformers", "ollama"), default="transformers",
                   help="serving engine (default transformers; ollama is the paper's engine)")
    p.add_argument("--gpus", type=common.nonneg_int, default=None,
                   help="number of GPUs to use, 0 = CPU (default: 1 if a GPU is available, else "
                        "0; ollama: the server's default)")
    p.add_argument("--gpu-vendor", choices=("auto", "nvidia", "amd"), default="auto",
                   help="GPU-visibility variable for ollama serve: CUDA_ (nvidia) or "
                        "ROCR_VISIBLE_DEVICES (amd) (default auto)")
    p.add_argument("--max-new-tokens", type=common.positive_int, default=32,
                   help="tokens generated per prompt (default 32)")
    g = p.add_argument_group("ollama engine")
    g.add_argument("--model", default="llama3.1:8b", help="Ollama model name (default llama3.1:8b)")
    g.add_argument("--pull", action="store_true", help="pull the model if the server lacks it")
    g.add_argument("--server-timeout", type=common.positive_int, default=60,
                   help="seconds to wait for a self-started ollama serve (default 60)")
    g.add_argument("--request-timeout", type=common.positive_int, default=600,
                   help="seconds allowed per prompt (default 600)")
    g = p.add_argument_group("transformers engine (random-weight LLaMA)")
    g.add_argument("--hidden-size", type=common.positive_int, default=64)
    g.add_argument("--layers", type=common.positive_int, default=2)
    g.add_argument("--heads", type=common.positive_int, default=4)
    g.add_argument("--kv-heads", type=common.positive_int, default=None,
                   help="key/value heads (default: --heads)")
    g.add_argument("--intermediate-size", type=common.positive_int, default=None,
                   help="MLP size (default 4 x hidden size)")
    g.add_argument("--vocab-size", type=common.positive_int, default=512,
                   help="vocabulary size, >= 259 (default 512)")
    g.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    return p


def run(argv):
    args = make_parser().parse_args(argv)
    if args.engine == "transformers":
        if args.hidden_size % args.heads:
            raise common.UsageError(f"--hidden-size {args.hidden_size} is not a multiple of "
                                    f"--heads {args.heads}")
        if args.heads % (args.kv_heads or args.heads):
            raise common.UsageError("--heads must be a multiple of --kv-heads")
        if args.vocab_size < 259:
            raise common.UsageError(f"--vocab-size must be >= 259 (got {args.vocab_size})")
    if args.device == "cpu" and args.gpus:
        raise common.UsageError("--device cpu contradicts --gpus > 0")
    if args.device == "cuda" and args.gpus == 0:
        raise common.UsageError("--device cuda contradicts --gpus 0")
    out = common.Output()
    record = common.base_record(NAME, args, batch_size=1)
    record.update({"metric": "throughput", "unit": "tokens/s", "max_new_tokens": args.max_new_tokens})
    runner = LlmRunner(None, args.max_new_tokens)
    try:
        if args.engine == "transformers":
            runner.answer = transformers_engine(args, record)
        else:
            runner.answer = ollama_engine(args, record, runner)
        record["torch"] = common.torch_version()
        common.log(NAME, f"{args.engine} engine, {args.steps} prompts, "
                         f"{args.max_new_tokens} new tokens each, device {record['device']}")
        common.drive(NAME, args, runner, record, out)
    finally:
        runner.close()


def main(argv=None):
    return common.main(NAME, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
