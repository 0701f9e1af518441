"""The rules: one entry per rule id, with its severity, one-line message, a short doc and, for the
rules of our own, an example and the check that finds it.

One vocabulary for both kinds of file: where a smell in an Apptainer definition is the smell a
hadolint rule finds in a Dockerfile, the definition linter reports it under hadolint's id
(DL3008 = unpinned apt packages, in either kind of file). Ids of our own: AP = Apptainer
definitions only, GR = gen-recipe checks hadolint lacks (Dockerfiles, most in definitions too).
ShellCheck findings keep their SC ids; hadolint's other DL ids are reported as hadolint says.

A GR rule is one entry below: id, message, doc, example and its `check`. Both linters hand the
check the same thing (see Step and Image) and `run` runs every check that applies to their kind
of file; dockerfile.py and definition.py only parse.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from generator.errors import did_you_mean
from generator.lint import shell
from generator.lint.model import LintError
from generator.lint.shell import Command

SEVERITIES = ("error", "warning", "info", "style")
HADOLINT_WIKI = "https://github.com/hadolint/hadolint/wiki/{id}"
SHELLCHECK_WIKI = "https://www.shellcheck.net/wiki/{id}"


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    message: str        # one line, as reported
    doc: str            # what and why, a few sentences
    applies: str        # "docker", "definition" or "both"; "hadolint"/"shellcheck" for theirs
    fix: str = ""       # what --fix does, "" = nothing
    example: str = ""   # shell (or Dockerfile) text the check reports
    check: Callable[..., Iterator[Hit]] | None = None   # rules of our own: finds it (takes a Step or an Image)
    scope: str = "step"                                 # what check takes: "step" or "image"


_THEIRS = (
    # ---- hadolint ids, also checked by us in definitions ------------------------------------
    Rule("DL3008", "warning", "Pin versions in apt-get install: `apt-get install <package>=<version>`",
         "An unpinned package installs whatever version the mirror has on the day of the build, so two builds "
         "of one recipe differ. Pin `pkg=version`, or silence it with a reason where the base image release pins "
         "the distro versions (the generator does: `# gen-recipe: ignore=DL3008` / `# hadolint ignore=DL3008`).",
         "both"),
    Rule("DL3009", "info", "Delete the apt lists (/var/lib/apt/lists) after installing something",
         "`apt-get update` leaves ~40 MB of package lists in the image. In a Dockerfile they must go in the same "
         "RUN (a later RUN cannot shrink an earlier layer); in a definition anywhere later in the stage's %post "
         "(Apptainer appends all %post sections into one script and a SIF has no layers).", "both",
         "appends `rm -rf /var/lib/apt/lists/*` to the RUN / the %post section"),
    Rule("DL3014", "warning", "Use the `-y` switch to avoid manual input: `apt-get install -y <package>`",
         "Builds have no terminal: without -y apt-get asks and aborts.", "both", "adds -y"),
    Rule("DL3015", "info", "Avoid additional packages by specifying `--no-install-recommends`",
         "Recommended packages are not needed to run and often double the image size.", "both",
         "adds --no-install-recommends"),
    Rule("DL3027", "warning", "Do not use apt (an interactive tool); use apt-get",
         "apt's command-line interface is not stable for scripts and warns so.", "both", "apt → apt-get"),
    Rule("DL3013", "warning", "Pin versions in pip: `pip install <package>==<version>` or `-r requirements`",
         "An unpinned requirement resolves to a different version on every build.", "both"),
    Rule("DL3042", "warning", "Avoid the pip cache: `pip install --no-cache-dir <package>`",
         "pip keeps every downloaded wheel under ~/.cache/pip: hundreds of MB for torch, in the image.", "both",
         "adds --no-cache-dir"),
    Rule("DL3033", "warning", "Specify versions with `yum install -y <package>-<version>`",
         "As DL3008, for yum.", "both"),
    Rule("DL3030", "warning", "Use the -y switch to avoid manual input: `yum install -y <package>`",
         "As DL3014, for yum.", "both", "adds -y"),
    Rule("DL3032", "warning", "`yum clean all` missing after yum command",
         "yum's cache stays in the image (same layer rule as DL3009).", "both", "adds `yum clean all`"),
    Rule("DL3041", "warning", "Specify versions with `dnf install -y <package>-<version>`",
         "As DL3008, for dnf.", "both"),
    Rule("DL3038", "warning", "Use the -y switch to avoid manual input: `dnf install -y <package>`",
         "As DL3014, for dnf.", "both", "adds -y"),
    Rule("DL3040", "warning", "`dnf clean all` missing after dnf command",
         "dnf's cache stays in the image (same layer rule as DL3009).", "both", "adds `dnf clean all`"),
    Rule("DL3037", "warning", "Specify versions with `zypper install -y <package>=<version>`",
         "As DL3008, for zypper.", "both"),
    Rule("DL3034", "warning", "Non-interactive switch missing from zypper command: `zypper install -y`",
         "As DL3014, for zypper.", "both", "adds -y"),
    Rule("DL3036", "warning", "`zypper clean` missing after zypper use",
         "zypper's cache stays in the image (same layer rule as DL3009).", "both", "adds `zypper clean`"),
    Rule("DL4006", "warning", "A pipe without `pipefail`: a failure left of `|` does not fail the build",
         "`wget -O- URL | tar x` succeeds when the download fails. Dockerfile: `SHELL [\"/bin/bash\", \"-o\", "
         "\"pipefail\", \"-c\"]` before the RUN. Definition: /bin/sh (dash) has no pipefail; run %post with "
         "`%post -c /bin/bash` and `set -eo pipefail`.", "both",
         "--unsafe-fixes only (bash is not sh: never provable): Dockerfile: inserts the SHELL line (not for "
         "alpine/busybox images); definition: `%post -c /bin/bash` on the stage's %post sections + `set -eo pipefail`"),
    # ---- hadolint ids we only fix (hadolint finds them in Dockerfiles) -------------------------
    Rule("DL3003", "warning", "Use WORKDIR to switch to a directory",
         "`cd` in a RUN lasts for that RUN only and hides where the build happens. In definitions `cd` in %post "
         "is fine (one script, no WORKDIR), so this is not checked there.", "hadolint",
         "--unsafe-fixes only (WORKDIR resolves symbolic links, cd does not): `RUN cd DIR && rest` (one cd, first, "
         "literal DIR) → `WORKDIR DIR`, `RUN rest`, `WORKDIR <previous>`"),
    Rule("DL3002", "warning", "Last USER should not be root",
         "An explicit `USER root` at the end of the final stage runs the container as root.", "hadolint"),
    Rule("DL3059", "info", "Multiple consecutive RUN instructions. Consider consolidation.",
         "Each RUN is a layer; hadolint suggests merging neighbours.", "hadolint"),
    Rule("SC2046", "warning", "Quote this to prevent word splitting",
         "ShellCheck: an unquoted `$(...)` is split into words (hpccm's `make -j$(nproc)`).", "shellcheck"),
    Rule("SC2086", "info", "Double quote to prevent globbing and word splitting",
         "ShellCheck: an unquoted `$VAR` is split and globbed (hpccm's `export PATH=/x:$PATH` in %environment).",
         "shellcheck"),
    Rule("SC2174", "warning", "When used with -p, -m only applies to the deepest directory",
         "ShellCheck: `mkdir -p -m 700 a/b` leaves `a` with the default mode.", "shellcheck"),
    Rule("SC1090", "warning", "ShellCheck can't follow non-constant source",
         "ShellCheck: `. /.singularity.d/env/10-docker*.sh` is a glob. Add `# shellcheck source=/dev/null` "
         "above it.", "shellcheck"),
)


# ---------------------------------------------------------------------------------------------
# Our own rules: each one entry, its check next to it
# ---------------------------------------------------------------------------------------------
# A check reads shell the same way for both kinds of file: a Step (a Dockerfile RUN, or a
# definition stage's %post script) or the Image (the final stage). It yields (line, message,
# pragma ids of that command); `applies` says which kinds of file it runs on.

Hit = tuple[int, str, frozenset[str]]


class Later:
    """The commands of a Dockerfile stage's RUNs (in order) or of a definition's %post script, by position, for the
    checks that ask what comes after a command: each answer comes from an index built once per stage (when first
    asked), not from reading the later commands again, so the checks stay linear in the number of commands."""

    def __init__(self, pairs: Sequence[tuple[Command, str | None]], lines: Sequence[int | None] = ()):
        self.pairs = pairs              # each command with the directory it runs in
        self.lines = lines              # the line of the RUN each position belongs to (a Dockerfile)

    @functools.cached_property
    def removals(self) -> shell.Removals:
        return shell.Removals(self.pairs)

    def _last(self, test: Callable[[Command], bool]) -> int:
        return max((k for k, (c, _) in enumerate(self.pairs) if test(c)), default=-1)

    @functools.cached_property
    def last_verify(self) -> int:
        return self._last(shell.verifies)

    @functools.cached_property
    def last_clean(self) -> dict[str, int]:
        return {m.name: self._last(lambda c, m=m: shell.is_clean(c, m)) for m in shell.MANAGERS}

    @functools.cached_property
    def last_checkout(self) -> dict[str | None, int]:
        """The last `git checkout/reset/switch COMMIT` in each repository folder (None: unknown folder)."""
        out: dict[str | None, int] = {}
        for k, (d, cwd) in enumerate(self.pairs):
            if d.program == "git" and any(w in ("checkout", "reset", "switch") for w in d.words[1:5]) \
                    and any(_COMMIT.fullmatch(w) or "$" in w or "__SUB__" in w for w in d.words[2:]):
                out[_git_dir(d, cwd)] = k
        return out

    @functools.cached_property
    def last_any_checkout(self) -> int:
        return max(self.last_checkout.values(), default=-1)

    def checked_out_after(self, where: str | None, position: int) -> bool:
        """Whether a commit is checked out after `position` in folder `where` (None: in any folder)."""
        if where is None:
            return self.last_any_checkout > position
        return max(self.last_checkout.get(None, -1), self.last_checkout.get(where, -1)) > position


@dataclass(frozen=True, eq=False)
class Step:
    """Shell run in one build step: a Dockerfile instruction, or a definition stage's %post script."""

    pairs: tuple[tuple[Command, str | None], ...]   # each command with the directory it runs in (None: unknown)
    line: int | None = None                         # a Dockerfile instruction's first line; None in a script
    later: Later | None = None                      # its stage's commands (Dockerfile), or None: its own
    start: int = 0                                  # the position of its first command there
    add: str | None = None                          # the URL of an `ADD URL` without --checksum
    inner: tuple[Command, ...] = ()                 # the commands inside its command substitutions

    def __post_init__(self) -> None:
        if self.later is None:
            object.__setattr__(self, "later", Later(self.pairs))

    @property
    def commands(self) -> list[Command]:
        return [c for c, _ in self.pairs]


@dataclass(frozen=True, eq=False)
class Image:
    """The final stage: where it starts, its last USER (None: none), and the commands of a single-stage recipe
    (empty when there are more stages)."""

    line: int
    user: str | None
    single: tuple[Command, ...]


def _pipe_to_shell(step: Step) -> Iterator[Hit]:
    for chain in shell.pipelines(step.commands).values():
        fetch = shell.is_pipe_to_shell(chain)
        if fetch is not None:
            yield (fetch.line, f"`{fetch.program} ... | {chain[-1].program}` runs a download unchecked",
                   fetch.ignore)


PIPE_TO_SHELL = Rule(
    "GR001", "warning", "Download piped into a shell or an interpreter (`curl|wget ... | sh`, `| python3 -`)",
    "Runs code nobody reviewed, changes under the same URL, and a failed download still runs a partial "
    "script. The same for any interpreter that runs what it reads (python, perl, ruby, node, php). Download "
    "to a file, check its checksum, then run it.", "both",
    example="curl -fsSL https://example.org/install.sh | sh", check=_pipe_to_shell)


def _download_in_layer(step: Step) -> Iterator[Hit]:
    for k, (c, cwd) in enumerate(step.pairs):
        path = shell.downloaded(c, cwd)
        at = step.later.removals.first_after(path, step.start + k) if path else None
        if not path or at is not None and at < step.start + len(step.pairs):
            continue
        where = f"deleted only by the RUN on line {step.later.lines[at]}" if at is not None else "never deleted"
        yield c.line, f"{path} is downloaded here and {where}: it stays in this layer", c.ignore


DOWNLOAD_IN_LAYER = Rule(
    "GR002", "warning", "Downloaded archive is not deleted in the RUN that downloaded it",
    "A file written in one RUN stays in that RUN's layer: deleting it in a later RUN hides it but the image "
    "does not shrink; never deleting it keeps it in the image.", "docker",
    "merges the RUNs from the download to the deletion (only RUNs in between, same flags)",
    example="RUN wget -q https://example.org/tool.tar.gz && tar xf tool.tar.gz", check=_download_in_layer)


def _root_user(image: Image) -> Iterator[Hit]:
    if image.user is None:
        yield image.line, "the final stage sets no USER: its processes run as root", frozenset()


ROOT_USER = Rule(
    "GR003", "warning", "The final stage runs as root: add a non-root USER",
    "Without USER the container's processes run as root (docker, podman). Add a user and `USER uid:gid` at "
    "the end of the runtime stage. (Apptainer runs as the calling user: not checked in definitions.)",
    "docker", "appends `RUN useradd --create-home --uid 10001 --user-group app` and `USER 10001:10001` "
    "(not for scratch/distroless/alpine/busybox bases)",
    example="FROM debian:12", check=_root_user, scope="image")


def _unverified(step: Step) -> Iterator[Hit]:
    commands = step.commands
    piped = {id(f) for chain in shell.pipelines(commands).values() if (f := shell.is_pipe_to_shell(chain))}
    for k, c in enumerate(commands):
        url = shell.fetched_url(c)
        if url and id(c) not in piped and step.later.last_verify <= step.start + k:
            yield c.line, f"{url} is downloaded without a checksum or signature check", c.ignore
    if step.add:
        yield step.line, f"`ADD {step.add}` without --checksum=sha256:...", frozenset()


UNVERIFIED = Rule(
    "GR004", "warning", "Download without a checksum or signature check",
    "An archive, installer or key fetched with curl/wget (or `ADD <url>`) is trusted as whatever the server "
    "sends that day: a moved tag, a compromised mirror or a truncated file goes into the image. Check it "
    "after the download: `echo \"<sha256>  FILE\" | sha256sum -c -` (or `gpg --verify`), "
    "`ADD --checksum=sha256:<sha256> URL DEST`.", "both",
    example="wget -q https://example.org/tool-1.0.tar.gz", check=_unverified)


def _late_cleanup(step: Step) -> Iterator[Hit]:
    cleaned = [shell.cleans(c) for c in step.commands]
    if cleaned and all(cleaned):
        yield (step.line, f"`{'; '.join(cleaned)}` in a RUN of its own: the files stay in the earlier layer that "
                          f"created them", frozenset())


LATE_CLEANUP = Rule(
    "GR005", "warning", "Cleanup in a later layer than the one that created the files",
    "`RUN rm -rf /tmp/*`, `RUN apt-get clean`, `RUN pip cache purge` as a RUN of their own hide the files "
    "but the earlier layer still holds them: the image does not shrink. Clean up in the RUN that made the "
    "mess.", "docker",
    example="RUN apt-get clean && rm -rf /var/lib/apt/lists/* /tmp/*", check=_late_cleanup)


def _toolchain_left(image: Image) -> Iterator[Hit]:
    """Compilers/headers installed, something compiled, nothing uninstalled afterwards (the first such install)."""
    commands = image.single
    if not any(shell.builds(c) for c in commands):
        return
    last_uninstall = max((k for k, c in enumerate(commands) if shell.uninstalls(c)), default=-1)
    for k, c in enumerate(commands):
        inst = shell.install(c)
        tools = shell.toolchain(inst) if inst else []
        if tools and last_uninstall <= k:
            yield (c.line, f"build toolchain ({' '.join(tools[:4])}{' ...' if len(tools) > 4 else ''}) stays in the "
                           f"final image of a single-stage recipe that compiles", c.ignore)
            return


TOOLCHAIN_LEFT = Rule(
    "GR006", "info", "Build toolchain left in the final image of a single-stage recipe that compiles",
    "Compilers, build tools and -dev/-devel headers are needed to build, not to run: in a single-stage "
    "recipe they ship in the image (hundreds of MB, a larger attack surface). Build in a first stage and "
    "copy the result into a runtime stage, or remove them in the same step.", "both",
    example="apt-get install -y gcc make && make -C /src", check=_toolchain_left, scope="image")


def _each_command(find: Callable[[Command], str | None], message: str) -> Callable[[Step], Iterator[Hit]]:
    """A check that reports every command `find` finds something in: `message` with {program} and {found}."""
    def check(step: Step) -> Iterator[Hit]:
        for c in step.commands:
            found = find(c)
            if found:
                yield c.line, message.format(program=c.program, found=found), c.ignore
    return check


INSECURE = Rule(
    "GR007", "warning", "Package signature or TLS checks switched off",
    "`--allow-unauthenticated`, `--no-gpg-checks`, `--nogpgcheck`, `[trusted=yes]`, `gpgcheck=0`, "
    "`--force-yes`, `curl -k`, `wget --no-check-certificate`, `pip --trusted-host` install whatever a "
    "man in the middle serves. Install the repository's key instead.", "both",
    example="apt-get install -y --allow-unauthenticated vendor-tool=1.0",
    check=_each_command(shell.insecure, "`{program} ... {found}` turns signature or TLS checks off"))


SUBSTITUTED = Rule(
    "GR008", "warning", "A command substitution decides what runs, is installed or is downloaded",
    "`RUN $(cat /tmp/py) -m venv`, `apt-get install $(cat pkgs)`, `wget https://x/$(v)` run whatever that "
    "substitution prints: a value spliced into the script (a build argument, a site setting) becomes a "
    "command. Write the program, the packages and the URL literally, or quote a variable: `\"$PYTHON\"`.",
    "both", example="$(echo $PY) -m venv /opt/venv", check=_each_command(shell.substituted, "a command substitution decides {found}"))


_HASH_OPTIONS = {"openssl": ("-salt", "-in"), "mkpasswd": ("-m", "--method", "-S", "--salt", "-R", "--rounds",
                                                              "-P", "--password-fd")}


def _password(step: Step) -> Iterator[Hit]:
    """A password written into the recipe: `echo user:pass | chpasswd`, `useradd -p HASH`."""
    for chain in shell.pipelines(step.commands).values():
        if chain[-1].program in ("chpasswd", "passwd") and any(
                c.program in ("echo", "printf") and not any("$" in w or "__SUB__" in w for w in c.words[1:])
                and len(c.words) > 1 for c in chain[:-1]):
            yield chain[-1].line, f"a password written in the recipe goes to `{chain[-1].program}`", chain[-1].ignore
    for c in step.commands:
        found = shell.option_value(c.words, "-p", "--password") if c.program in ("useradd", "usermod") else None
        if found and "__SUB__" not in found and not re.match(r"\$\{?[A-Za-z_]", found) \
                and found not in ("*", "!", "!!", "x"):                  # a hash, not a variable or a lock
            yield c.line, f"`{c.program} -p` sets a password hash written in the recipe", c.ignore
    for c in step.inner:                        # useradd -p "$(openssl passwd -6 secret)"
        hashing = c.words[2:] if c.program == "openssl" and c.words[1:2] == ("passwd",) else \
            c.words[1:] if c.program == "mkpasswd" else ()
        values = _HASH_OPTIONS.get(c.program, ())
        given = [w for k, w in enumerate(hashing) if not w.startswith("-") and not (k and hashing[k - 1] in values)]
        if given and not any("$" in w or "__SUB__" in w for w in given):
            yield c.line, f"`{' '.join(c.words[:2 if c.program == 'openssl' else 1])}` hashes a password written in " \
                          "the recipe", c.ignore


HARDCODED_PASSWORD = Rule(
    "GR010", "warning", "A password written in the recipe",
    "`echo user:secret | chpasswd`, `useradd -p HASH` or `useradd -p \"$(openssl passwd secret)\"` put the "
    "credential into the recipe, the image's layers "
    "and its history, for everyone who pulls it (CIS Docker Benchmark, 4.10: do not store secrets in "
    "Dockerfiles). Create the user without a password and authenticate otherwise, or pass the secret at "
    "build time as a secret mount.", "both", example="echo user:secret | chpasswd", check=_password)


def _http_key(step: Step) -> Iterator[Hit]:
    """A signing key fetched over plain http://: the man in the middle chooses the key."""
    for chain in shell.pipelines(step.commands).values():
        for c in chain:
            url = shell.fetched_url(c)
            if not url or not url.startswith("http://"):
                continue
            keyed = shell.KEY.search(url) or any(d.program in ("apt-key", "gpg", "rpm") and (
                d.program != "rpm" or "--import" in d.words) for d in chain if d is not c)
            if keyed:
                yield c.line, f"a signing key fetched over plain http ({url[:60]}): whoever is in between chooses it", \
                    c.ignore


HTTP_KEY = Rule(
    "GR011", "error", "A signing key fetched over plain http://",
    "A repository's signing key is what every later package is checked against. Fetched over http, anyone "
    "between the build and the server replaces it, and the packages signed with theirs install without a "
    "warning. Fetch it over https and check its fingerprint (Debian wiki, SecureApt).", "both",
    example="curl -fsSL http://example.org/repo.gpg | apt-key add -", check=_http_key)


def _writable_by_all(mode: str) -> bool:
    """A chmod mode that lets every user write (the sticky bit of /tmp-like folders excepted)."""
    if re.fullmatch(r"[0-7]{3,4}", mode):
        return bool(int(mode[-1]) & 2) and not (len(mode) == 4 and int(mode[0]) & 1)
    return any(re.fullmatch(r"[ugo]*[oa][ugoa]*[+=][rwxXst]*w[rwxXst]*", part) for part in mode.split(","))


def _world_writable(c: Command) -> str | None:
    if c.program == "chmod":
        return next((w for w in c.words[1:] if not w.startswith("-") and _writable_by_all(w)), None)
    if c.program in ("mkdir", "install"):
        mode = shell.option_value(c.words, "-m", "--mode")
        return mode if mode and _writable_by_all(mode) else None
    return None


WORLD_WRITABLE = Rule(
    "GR012", "warning", "`chmod 777` (or a+rwx, o+w): files and folders anyone may change",
    "A world-writable file or folder in an image can be changed by any user of a shared system that runs it "
    "(Apptainer runs as the caller) and by any process in the container: its programs and libraries can be "
    "replaced. Give the owner (and group) what they need: `chmod 755`, `chown`.", "both",
    example="chmod -R 777 /opt/app", check=_each_command(_world_writable, "`{program} {found}` makes files anyone may change"))


def _nopasswd(c: Command) -> str | None:
    return "NOPASSWD" if any("NOPASSWD" in w for w in c.words) else None


NOPASSWD = Rule(
    "GR013", "warning", "Password-less sudo (`NOPASSWD`) written into the image",
    "`... NOPASSWD: ALL` in sudoers lets any process that runs as that user become root without a secret: "
    "the non-root USER protects nothing (CIS Docker Benchmark, 4.1: a non-root user for the container). "
    "Install what needs root at build time instead.", "both",
    example="echo 'app ALL=(ALL) NOPASSWD: ALL' >> /etc/sudoers",
    check=_each_command(_nopasswd, "password-less sudo ({found}): the user becomes root without a secret"))


_VERSION_TAG = re.compile(r"v?[0-9]+(\.[0-9]+)+([._+-][\w.]+)?|[\w.-]*-[0-9]+(\.[0-9]+)+[\w.-]*")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


def _clone_dir(c: Command, cwd: str | None) -> str | None:
    """Where `git clone URL [DIR]` puts the repository (None: unknown)."""
    args, skip = [], False
    for w in c.words[2:]:
        if skip:
            skip = False
        elif w in ("-b", "--branch", "--depth", "-o", "--origin", "-c", "--config", "--reference", "--filter", "-j",
                   "--jobs", "--separate-git-dir", "--template", "-u", "--upload-pack", "--shallow-since"):
            skip = True
        elif not w.startswith("-"):
            args.append(w)
    if not args:
        return None
    target = args[1] if len(args) > 1 else posixpath.basename(args[0].rstrip("/")).removesuffix(".git")
    return shell.absolute(target, cwd)


def _git_dir(d: Command, cwd: str | None) -> str | None:
    where = d.words[d.words.index("-C") + 1] if "-C" in d.words[:-1] else "."
    return shell.absolute(where, cwd)


def _unpinned_clone(step: Step) -> Iterator[Hit]:
    """`git clone` of a branch (the default one, or `-b main`) with no commit checked out in it afterwards."""
    for k, (c, cwd) in enumerate(step.pairs):
        if c.program != "git" or "clone" not in c.words[1:3]:
            continue
        branch = shell.option_value(c.words, "-b", "--branch")
        if branch and (_VERSION_TAG.fullmatch(branch) or "$" in branch or "__SUB__" in branch):
            continue
        if step.later.checked_out_after(_clone_dir(c, cwd), step.start + k):
            continue
        yield (c.line, f"`git clone` of {'branch ' + branch if branch else 'the default branch'} with no commit "
                       "checked out: the image changes when the branch moves", c.ignore)


UNPINNED_CLONE = Rule(
    "GR014", "info", "`git clone` of a branch with no pinned commit or release tag",
    "A branch moves: the same recipe builds different code next week, and a compromised repository goes "
    "straight into the image. Clone a release tag (`--branch v1.2.3`) or check out a commit "
    "(`git checkout 3f2a9c1...`) after the clone.", "both",
    example="git clone https://github.com/example/tool.git /opt/tool", check=_unpinned_clone)


# End of life of the distributions and Pythons base images are made from: (image name, tag pattern) -> (when,
# the source). Checked against the distributions' own release pages (titles in docs/lint.md, GR015).
END_OF_LIFE = (
    ("centos", r"(centos)?6(\.[0-9.]+)?", "CentOS Linux 6 reached its end of life on 2020-11-30"),
    ("centos", r"(centos)?7(\.[0-9.]+)?", "CentOS Linux 7 reached its end of life on 2024-06-30"),
    ("centos", r"(centos)?8(\.[0-9.]+)?", "CentOS Linux 8 reached its end of life on 2021-12-31"),
    ("ubuntu", r"(14\.04(\.[0-9]+)?|trusty)(-[0-9]+)?", "Ubuntu 14.04 left standard support in 2019-04"),
    ("ubuntu", r"(16\.04(\.[0-9]+)?|xenial)(-[0-9]+)?", "Ubuntu 16.04 left standard support in 2021-04"),
    ("ubuntu", r"(18\.04(\.[0-9]+)?|bionic)(-[0-9]+)?", "Ubuntu 18.04 left standard support on 2023-05-31"),
    ("ubuntu", r"(20\.04(\.[0-9]+)?|focal)(-[0-9]+)?", "Ubuntu 20.04 left standard support on 2025-05-31"),
    ("debian", r"(8|jessie)([.-].*)?", "Debian 8 left LTS on 2020-06-30"),
    ("debian", r"(9|stretch)([.-].*)?", "Debian 9 left LTS on 2022-06-30"),
    ("debian", r"(10|buster)([.-].*)?", "Debian 10 left LTS on 2024-06-30"),
    ("debian", r"(11|bullseye)([.-].*)?", "Debian 11 left LTS on 2026-08-31"),
    ("python", r"2(\.[0-9]+)*([.-].*)?", "Python 2 reached its end of life on 2020-01-01"),
    ("python", r"3\.[0-7](\.[0-9]+)?([.-].*)?", "Python 3.7 and older reached their end of life by 2023-06-27"),
    ("python", r"3\.8(\.[0-9]+)?([.-].*)?", "Python 3.8 reached its end of life on 2024-10-07"),
    ("centos/centos", r"stream8", "CentOS Stream 8 reached its end of life on 2024-05-31"),
)
_CUDA_OS = re.compile(r"-(ubuntu1[468]\.04|ubuntu20\.04|centos[678])$")


def end_of_life(image: str) -> str | None:
    """Why an image reference names a base past its end of life (None: not one we know of)."""
    ref = re.sub(r"@sha256:[0-9a-f]+$", "", image.strip().lower())
    name, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "")
    short = re.sub(r"^(docker\.io/|quay\.io/)?(library/)?", "", name)
    for base, pattern, why in END_OF_LIFE:
        if short == base and re.fullmatch(pattern, tag):
            return why
    found = _CUDA_OS.search(tag) if short.endswith("nvidia/cuda") else None
    if found:
        os_name = found.group(1)
        return end_of_life(f"{re.sub(r'[0-9.]+$', '', os_name)}:{re.sub(r'^[a-z]+', '', os_name)}")
    return None


END_OF_LIFE_BASE = Rule(
    "GR015", "warning", "A base image past its end of life",
    "A distribution (or Python) past its end of life gets no security updates: every known hole stays in the "
    "image, and its package mirrors move or disappear (CentOS 7's did), so the recipe stops building. Move to "
    "a supported release.", "both", example="FROM centos:7")


_APPTAINER = (
    Rule("AP001", "error", "Each stage must start with a `Bootstrap:` header",
         "Apptainer requires `Bootstrap` as the first header keyword of every stage; a definition without one can "
         "only update an existing image.", "definition"),
    Rule("AP002", "error", "Unknown bootstrap agent, or one the target version does not know",
         "Known agents: docker, docker-archive, docker-daemon, oci, oci-archive, localimage, library, shub, "
         "yum, zypper, debootstrap, arch, busybox, scratch (all versions); oras (Singularity >= 3.3, any "
         "Apptainer); dnf (Apptainer >= 1.4, SingularityCE >= 4.3); buildkit and dockerfile (Apptainer >= 1.5).",
         "definition"),
    Rule("AP003", "error", "Header keyword required by this bootstrap agent is missing",
         "docker/oci/localimage/library/shub/oras/docker-* need `From`; yum, zypper and busybox need `MirrorURL`; "
         "debootstrap needs `MirrorURL` and `OSVersion`.", "definition"),
    Rule("AP004", "error", "Unknown or malformed header keyword",
         "The header is `Keyword: value` lines; Apptainer refuses unknown keywords (\"invalid header keyword\").",
         "definition"),
    Rule("AP005", "error", "Unknown section",
         "Sections: %setup %files %environment %post %runscript %startscript %test %labels %help %arguments, and "
         "%appinstall %appfiles %appenv %apprun %appstart %apptest %applabels %apphelp with an app name.",
         "definition"),
    Rule("AP006", "error", "Stage name used twice",
         "`%files from NAME` copies from the first stage of that name; the second is unreachable.", "definition"),
    Rule("AP007", "error", "`%files from` names no earlier stage",
         "Files can only be copied from a stage defined before the current one.", "definition"),
    Rule("AP008", "error", "Multi-stage definitions need Singularity 3.2 or later (or any Apptainer)",
         "`Stage:` and `%files from` were added in Singularity 3.2; older versions fail on them. Set the target "
         "with --target.", "definition"),
    Rule("AP009", "warning", "Second %runscript/%startscript/%test/%help/%arguments in one stage is appended",
         "Apptainer appends sections of one name into one script: a second %runscript does not replace the first "
         "(and runs after its `exec`, i.e. never). Keep one.", "definition"),
    Rule("AP010", "warning", "Sections of one kind with different arguments: the last header's apply to all",
         "Apptainer joins e.g. all %post sections of a stage into one script and runs it with the arguments of "
         "the last header that has some (`-c /bin/bash`).", "definition"),
    Rule("AP011", "warning", "`%post -c SHELL` without `-e`: a failing command does not stop the build",
         "Apptainer runs %post as `/bin/sh -ex SCRIPT`; with `-c /bin/bash` it runs `/bin/sh -ex -c \"/bin/bash "
         "SCRIPT\"`, so bash runs without errexit. Start the script with `set -e` (or `-c /bin/bash -e`).",
         "definition"),
    Rule("AP012", "error", "`%files` arguments other than `from STAGE`: Apptainer skips the section",
         "Apptainer copies a %files section only without arguments or with exactly `from STAGE`; anything else "
         "is ignored without a message.", "definition"),
    Rule("AP013", "warning", "Label defined twice in one stage: the last value wins", "", "definition"),
    Rule("AP014", "error", "%arguments needs Apptainer 1.2 or SingularityCE 4.0",
         "Build arguments (`%arguments`, `{{ NAME }}`) are not understood by older versions.", "definition"),
    Rule("AP015", "warning", "Arguments of %runscript/%startscript/%test go on the script's #! line",
         "Apptainer writes these scripts with `#!/bin/sh ARGS`; `-c /bin/bash` there breaks the script. Choose "
         "the shell with a `#!/bin/bash` first line in the section.", "definition"),
    Rule("AP016", "info", "Downloaded archive is not deleted in the stage's %post: it stays in the image",
         "A SIF has no layers, so deleting anywhere later in %post is enough; not deleting it ships it. Mild: "
         "some archives are meant to stay.", "definition"),
    Rule("AP017", "warning", "A build-time compiler variable in the final image's %environment",
         "CPATH, C_INCLUDE_PATH, CPLUS_INCLUDE_PATH, LIBRARY_PATH and PKG_CONFIG_PATH point compilers at headers "
         "and libraries of the build; in the image's %environment they reach every program it runs, and "
         "`export CPATH=/x:$CPATH` with CPATH unset leaves an empty element, which GCC reads as the current folder. "
         "Set them in %post of the stage that builds.", "definition"),
    Rule("AP018", "warning", "`Bootstrap: docker` from localhost/: a registry at https://localhost, not the local "
         "image store", "Apptainer's docker agent pulls `From:` from a registry. podman and Docker name images "
         "that exist only in their own store localhost/NAME; Apptainer then asks https://localhost:443 for it. "
         "Save the image as an OCI archive and use `Bootstrap: oci-archive`, or name the registry with its port.",
         "definition"),
    Rule("AP019", "info", "`Bootstrap: docker-daemon` needs a Docker daemon where the build runs",
         "The agent reads the image through the Docker daemon's socket. HPC login nodes run no Docker daemon, and "
         "rootless podman serves no socket unless `podman system service` runs. A registry (`docker`) or an OCI "
         "archive (`oci-archive`) builds anywhere.", "definition"),
    Rule("AP020", "info", "A relative `%files` source: read from the folder `apptainer build` runs in",
         "Apptainer resolves relative %files sources against the current directory of `apptainer build`, not the "
         "definition's folder: `apptainer build x.sif sub/x.def` run elsewhere stops with `cp: cannot stat`. "
         "Build from the folder that holds them, and say so in the file (the generator's files say how to "
         "write that folder, and silence this rule on the line before the section).", "definition"),
    Rule("AP022", "warning", "`From:` without a version, or `:latest` (the twin of DL3006/DL3007)",
         "A registry image without a tag (or with `latest`) is whatever that name points to at build time: "
         "the next build may start from another release. Give a version tag or, to build the same image every "
         "time, a digest (`From: debian:12@sha256:...`).", "definition"),
    Rule("AP021", "error", "A build argument `{{ NAME }}` with no value in the stage's %arguments",
         "Apptainer (1.2 and later) replaces `{{ NAME }}` before it parses the stage, from --build-arg or the "
         "stage's %arguments; a NAME with neither stops the build (\"build var NAME is not defined\"). The "
         "linter checks the scripts with the %arguments defaults in place and reads this NAME as a plain word.",
         "definition", example="%post\n    pip install torch=={{ TORCH }}"),
)

TIMED_OUT = Rule(
    "GR009", "error", "hadolint or ShellCheck did not finish within its time budget: the file was not checked by it",
    "Each file gets a time budget (20 s, or GEN_RECIPE_LINT_TIMEOUT seconds) in hadolint and in ShellCheck; "
    "very large files and deeply nested quoting or substitutions take them exponentially long. The process is "
    "killed and this finding takes the place of its findings (not cached: the next run tries again).", "both")

_RULES = (*_THEIRS, TIMED_OUT, PIPE_TO_SHELL, DOWNLOAD_IN_LAYER, ROOT_USER, UNVERIFIED, LATE_CLEANUP, TOOLCHAIN_LEFT, INSECURE,
          SUBSTITUTED, HARDCODED_PASSWORD, HTTP_KEY, WORLD_WRITABLE, NOPASSWD, UNPINNED_CLONE, END_OF_LIFE_BASE,
          *_APPTAINER)
RULES = {r.id: r for r in _RULES}


def run(scope: str, kind: str, context: Step | Image) -> list[tuple[int, str, str, frozenset[str]]]:
    """(line, rule id, message, pragma ids of that command) from every check of `scope` that applies to `kind`
    ("docker" or "definition") files."""
    return [(line, r.id, message, ignore) for r in _RULES if r.check and r.scope == scope and r.applies in (kind, "both")
            for line, message, ignore in r.check(context)]


def rule(rule_id: str) -> Rule:
    return RULES[rule_id]


def explain(rule_id: str) -> str:
    """The text `gen-recipe lint --explain ID` prints."""
    rid = rule_id.strip().upper()
    upstream = (HADOLINT_WIKI if rid.startswith("DL") else SHELLCHECK_WIKI if rid.startswith("SC") else "")
    r = RULES.get(rid)
    if r is None:
        if re.fullmatch(r"(DL|SC)[0-9]{4}", rid):
            who = "hadolint" if rid.startswith("DL") else "ShellCheck"
            return f"{rid}: a {who} rule, reported as {who} words it.\n{upstream.format(id=rid)}"
        raise LintError(f"lint: unknown rule id '{rule_id}' ({did_you_mean(rid, RULES)})")
    where = {"both": "Dockerfiles and Apptainer definitions", "docker": "Dockerfiles", "definition":
             "Apptainer definitions", "hadolint": "Dockerfiles (hadolint)", "shellcheck":
             "RUN bodies (via hadolint) and definition scripts"}[r.applies]
    lines = [f"{r.id} ({r.severity}): {r.message}", f"Checked in: {where}."]
    if r.doc:
        lines.append(r.doc)
    if r.fix:
        lines.append(f"--fix: {r.fix}.")
    if upstream:
        lines.append(upstream.format(id=r.id))
    return "\n".join(lines)
