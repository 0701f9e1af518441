"""--fix on random mixes of smelly lines: it ends, never raises, a second run changes nothing, and a safe fix keeps
every command (it changes only what it names)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from generator.lint import DEFINITION, DOCKER
from generator.lint import definition, dockerfile, shell
from generator.lint.fix import fix_text

RUNS = [
    "RUN apt-get update && apt-get install curl",
    "RUN apt install -y wget && apt-get install -qq git",
    "RUN pip install requests && pip3 --disable-pip-version-check install six==1.16.0",
    "RUN cd /opt && make && \\\n    make install",
    "RUN cd /opt && cd /tmp && ls",
    "RUN wget -q -O /tmp/a.tar.gz https://x/a.tar.gz",
    "RUN tar xzf /tmp/a.tar.gz -C /opt; ls",
    "RUN rm -f /tmp/a.tar.gz",
    "RUN curl -fsSL https://x/i.sh | sh",
    "RUN echo a | tee /b",
    "RUN yum install gcc && dnf install make",
    "RUN zypper install vim",
    "# hadolint ignore=DL3008\nRUN apt-get install -y --no-install-recommends jq",
    "WORKDIR /src",
    "ENV PIP_NO_CACHE_DIR=1",
    "RUN --mount=type=cache,target=/root/.cache pip install x==1",
    "COPY . /src",
    "RUN <<EOF\napt-get install x\nEOF",
    "USER 1000",
    "CMD [\"sh\"]",
]
POSTS = [
    "    apt-get update",
    "    apt-get install curl wget",
    "    apt install -y \\\n        git",
    "    # gen-recipe: ignore=DL3014\n    apt-get install jq",
    "    pip install --upgrade pip",
    "    python3 -m pip install numpy==2.1.3",
    "    wget -qO- https://x/a.tgz | tar xz",
    "    curl -fsSL https://x/i.sh | bash",
    "    yum install -y gcc",
    "    cd /opt && make",
    "    export PIP_NO_CACHE_DIR=1",
    "    cat > /x <<EOF\n    apt-get install y\nEOF",
]
HEADERS = ["%post", "%post -c /bin/bash", "%environment", "%runscript", "%files", "%labels"]


@st.composite
def dockerfiles(draw):
    stages = draw(st.lists(st.lists(st.sampled_from(RUNS), max_size=6), min_size=1, max_size=3))
    base = draw(st.sampled_from(["debian:12", "alpine:3.20", "scratch", "build"]))
    out = []
    for k, body in enumerate(stages):
        out.append(f"FROM {base if k else 'debian:12'} AS s{k}")
        out += body
    return "\n".join(out) + "\n"


@st.composite
def definitions(draw):
    out = []
    for k in range(draw(st.integers(1, 2))):
        out += ["Bootstrap: docker", f"From: {draw(st.sampled_from(['debian:12', 'alpine:3.20']))}", f"Stage: s{k}"]
        for _ in range(draw(st.integers(0, 4))):
            out.append(draw(st.sampled_from(HEADERS)))
            out += draw(st.lists(st.sampled_from(POSTS), max_size=4))
    return "\n".join(out) + "\n"


@settings(max_examples=60, deadline=None)
@given(dockerfiles())
def test_dockerfile_fix_is_idempotent(text):
    fixed, _ = fix_text(text, DOCKER)
    assert fix_text(fixed, DOCKER) == (fixed, [])
    assert len(dockerfile.parse(fixed)) >= len([i for i in dockerfile.parse(text) if i.keyword != "RUN"])


@settings(max_examples=60, deadline=None)
@given(definitions())
def test_definition_fix_is_idempotent(text):
    fixed, _ = fix_text(text, DEFINITION)
    assert fix_text(fixed, DEFINITION) == (fixed, [])
    assert len(definition.parse(fixed)) == len(definition.parse(text))


@settings(max_examples=60, deadline=None)
@given(dockerfiles(), definitions())
def test_unsafe_level_is_idempotent_and_adds_only_unsafe_fixes(text, defn):
    for source, kind in ((text, DOCKER), (defn, DEFINITION)):
        safe, done = fix_text(source, kind)
        assert not any(f.unsafe for f in done)
        fixed, all_done = fix_text(source, kind, unsafe=True)
        assert fix_text(fixed, kind, unsafe=True) == (fixed, [])
        if not any(f.unsafe for f in all_done):
            assert fixed == safe


# A safe fix changes only what it names: every command of the original still runs, in order, with the same
# words, except the rewrites the fix table lists (apt -> apt-get, flags added, `cd DIR &&` moved into a
# WORKDIR), and the only commands added are the named cleanups (and `set -eo pipefail` for %post).
ADDED_FLAGS = {"-y", "--no-cache-dir"}
ADDED_COMMANDS = {("rm", "-rf", "/var/lib/apt/lists/*"), ("yum", "clean", "all"), ("dnf", "clean", "all"),
                  ("zypper", "clean"), ("set", "-eo", "pipefail")}


def _docker_commands(text: str) -> list[tuple[str, ...]]:
    lines = text.split("\n")
    return [c.words for ins in dockerfile.parse(text) if ins.keyword == "RUN" and ins.shell_form
            for c in dockerfile.commands(ins, lines)]


def _definition_commands(text: str) -> list[tuple[str, ...]]:
    return [c.words for stage in definition.parse(text)
            for c in shell.split_script(definition.post_script(stage))[0]]


def _same_command(before: tuple[str, ...], after: tuple[str, ...]) -> bool:
    rename = ("apt-get",) + before[1:] if before[:1] == ("apt",) else before
    return [w for w in after if w not in ADDED_FLAGS or w in rename] == list(rename) or after == before


def _keeps_every_command(before: list[tuple[str, ...]], after: list[tuple[str, ...]]) -> str:
    """"" when `after` is `before` plus the named additions (and minus `cd DIR` moved to a WORKDIR)."""
    k = 0
    for command in after:
        if k < len(before) and _same_command(before[k], command):
            k += 1
        elif k + 1 < len(before) and before[k][:1] == ("cd",) and _same_command(before[k + 1], command):
            k += 2                                      # DL3003: the cd became a WORKDIR
        elif tuple(command) not in ADDED_COMMANDS:
            return f"added or changed: {' '.join(command)}"
    return "" if k == len(before) else f"dropped: {' '.join(before[k])}"


@settings(max_examples=80, deadline=None)
@given(dockerfiles(), definitions())
def test_a_safe_fix_keeps_every_command(text, defn):
    fixed, _ = fix_text(text, DOCKER)
    assert not _keeps_every_command(_docker_commands(text), _docker_commands(fixed)), (text, fixed)
    fixed, _ = fix_text(defn, DEFINITION)
    assert not _keeps_every_command(_definition_commands(defn), _definition_commands(fixed)), (defn, fixed)
