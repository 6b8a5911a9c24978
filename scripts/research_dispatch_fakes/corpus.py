"""The offline search corpus behind the fake Tavily server.

Why this module composes pages instead of storing them: the product's chunk ranker and its prompt
budgets only get exercised by realistic page sizes (10-15k characters) in which the relevant material
sits in a few sections among navigation, background and footer boilerplate. Hand-writing thirty such
pages would be unreviewable, so `corpus/pages.json` stores per page a synopsis and a handful of
hand-written key points, and this module wraps them, deterministically, in a site-specific page
(arXiv abstract page, GitHub README, vendor blog post or documentation page). The same JSON always
yields byte-identical content: every "choice" below is driven by a SHA-256 of the page URL, never by
randomness or the clock.

`corpus/hostile.json` holds prompt-injection pages. They are composed the same way, plus their
injection strings, and are only returned when a caller asks for them (`include_hostile=True`).

This module imports nothing from the product on purpose (see `research_dispatch_fakes`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import urlsplit, urlunsplit

#: The five topics of the repository's literature review, in report order; the same ids as the `id:` of
#: `topics/*.yaml` and the keys of `corpus/claims.json`, so pages can be matched to topics.
TOPIC_IDS: tuple[str, ...] = (
    "composer-2.5",
    "diloco-family",
    "monarch-torchforge-openenv",
    "verl-trl",
    "trace-replay-distillation",
)

MIN_CONTENT_CHARS = 10_000
MAX_CONTENT_CHARS = 15_000


@dataclass(frozen=True)
class Page:
    """One corpus page as the fake search engine sees it.

    `content` is the full composed page (what `include_raw_content` and `/extract` return);
    `synopsis` is the short description used for search snippets. `key_points` are the
    hand-written facts embedded in `content`; fakes that need to "know" what a page says (for
    example a scripted model answer) can use them without parsing the page.
    """

    url: str
    title: str
    topics: tuple[str, ...]
    synopsis: str
    content: str
    published: str | None = None
    hostile: bool = False
    key_points: tuple[str, ...] = ()
    abstract_page: str | None = None  # an arXiv paper's abstract page (`/abs/`); `content` is its full text

    @property
    def host(self) -> str:
        """Lower-case host name, used for domain filters."""
        return (urlsplit(self.url).hostname or "").lower()

    def text_at(self, url: str) -> str:
        """What reading the page at `url` returns: for an arXiv paper, its abstract page at `/abs/` and the
        full paper at `/pdf/` (as arXiv serves them); for any other page, the page."""
        if self.abstract_page is not None and "/pdf/" not in urlsplit(url.strip()).path:
            return self.abstract_page
        return self.content


# --------------------------------------------------------------------------------------------
# URL normalisation and loading
# --------------------------------------------------------------------------------------------


def normalize_url(url: str) -> str:
    """Canonical form for comparing URLs: lower-case scheme and host, no fragment, no trailing slash.

    Why: models and the product may echo a URL with or without the trailing slash, or with an
    anchor; the fake must still recognise the page, as a real extractor would.
    """
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    netloc = f"{host}:{parts.port}" if parts.port else host
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), netloc, path, parts.query, ""))


def _read_json(name: str) -> dict[str, Any]:
    """Read a bundled JSON file through importlib.resources, so it also works from a wheel."""
    text = resources.files(__name__.rpartition(".")[0]).joinpath("corpus").joinpath(name).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@functools.lru_cache(maxsize=1)
def _raw() -> tuple[dict[str, Any], dict[str, Any]]:
    return _read_json("pages.json"), _read_json("hostile.json")


def topic_titles() -> dict[str, str]:
    """Topic id -> human title, as stored in `pages.json`."""
    data, _ = _raw()
    return {tid: str(meta["title"]) for tid, meta in data["topics"].items()}


def topic_background(topic_id: str) -> tuple[str, ...]:
    """The topic's background paragraphs, which every page of the topic carries (empty: unknown topic)."""
    data, _ = _raw()
    meta = data["topics"].get(topic_id) or {}
    return tuple(str(p) for p in meta.get("background") or ())


@functools.lru_cache(maxsize=2)
def _load(include_hostile: bool) -> tuple[Page, ...]:
    data, hostile = _raw()
    topics: dict[str, dict[str, Any]] = data["topics"]
    entries: list[dict[str, Any]] = data["pages"]
    composer = _Composer(topics, entries)
    pages = [composer.page(entry, hostile=False, injections=()) for entry in entries]
    if include_hostile:
        common = tuple(str(s) for s in hostile["common_injections"])
        for entry in hostile["pages"]:
            own = tuple(str(s) for s in entry.get("injections", ()))
            pages.append(composer.page(entry, hostile=True, injections=own + common))
    return tuple(pages)


def load_pages(include_hostile: bool = False) -> list[Page]:
    """All corpus pages (normal pages first, then hostile pages if asked for). Cached; pages are frozen."""
    return list(_load(include_hostile))


@functools.lru_cache(maxsize=2)
def _by_url(include_hostile: bool) -> dict[str, Page]:
    return {normalize_url(p.url): p for p in _load(include_hostile)}


def page_by_url(url: str, include_hostile: bool = False) -> Page | None:
    """Look a page up by URL, comparing normalised forms (see `normalize_url`); an arXiv paper by either of
    its URLs (`/abs/<id>`, `/pdf/<id>`, with or without `.pdf`)."""
    return _by_url(include_hostile).get(normalize_url(arxiv_abs(url)))


def arxiv_abs(url: str) -> str:
    """An arXiv paper's PDF URL as its abstract-page URL (the corpus's key); any other URL unchanged."""
    return re.sub(r"^(https?://arxiv\.org/)pdf/([^/?#]+?)(\.pdf)?$", r"\1abs/\2", url.strip())


# --------------------------------------------------------------------------------------------
# Deterministic page composition
# --------------------------------------------------------------------------------------------

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

_SITE_NAMES = {
    "arxiv.org": "arXiv",
    "github.com": "GitHub",
    "cursor.com": "Cursor",
    "www.primeintellect.ai": "Prime Intellect",
    "huggingface.co": "Hugging Face",
    "thinkingmachines.ai": "Thinking Machines Lab",
}

_SUBJECTS = {
    "composer-2.5": "Software Engineering (cs.SE); Machine Learning (cs.LG); Computation and Language (cs.CL)",
    "diloco-family": "Machine Learning (cs.LG); Distributed, Parallel, and Cluster Computing (cs.DC)",
    "monarch-torchforge-openenv": "Distributed, Parallel, and Cluster Computing (cs.DC); Machine Learning (cs.LG)",
    "verl-trl": "Machine Learning (cs.LG); Artificial Intelligence (cs.AI); Computation and Language (cs.CL)",
    "trace-replay-distillation": "Machine Learning (cs.LG); Computation and Language (cs.CL); Machine "
    "Learning (stat.ML)",
}

# Lead-ins placed in front of a key point, so each fact reads as part of a running text.
_LEADS = (
    "The central mechanism is easiest to state directly.",
    "One detail deserves emphasis.",
    "One point is easy to miss on a first read.",
    "The specifics are as follows.",
    "The relevant design decision is the following.",
    "Here the source is explicit.",
    "A second ingredient matters just as much.",
    "For anyone trying to reproduce the work, the key fact is this.",
    "The evidence offered for this is specific.",
    "Stated plainly, the claim is this.",
    "The practical consequence is clear.",
    "It is worth recording exactly what is claimed here.",
)

# Connective paragraphs: plausible, low-information prose that separates the key facts.
_CONNECTIVES = (
    "Readers coming to {short} from adjacent work will recognise several of the design pressures "
    "discussed here. The interesting part is less any single component than the way the pieces are "
    "made to fit together under realistic compute and engineering budgets, which is also where most "
    "of the practical caveats live.",
    "It is worth separating what is claimed from what is demonstrated. The following paragraphs keep to "
    "the mechanisms that are described concretely enough to be checked against code or reproduced at a "
    "smaller scale, and they flag the places where the description stays at the level of intent.",
    "None of this happens in isolation. Choices about data, optimisation and infrastructure interact, "
    "and a change that looks minor in one place can shift the balance elsewhere, which is why careful "
    "write-ups report ablations alongside headline results.",
    "A useful way to read this material is to ask what would break first if the setting changed: a "
    "smaller model, a different cluster, noisier rewards or longer episodes. Some of the ideas here are "
    "robust to those changes and some clearly are not.",
    "The broader context is a field that moves quickly. Terminology is not yet settled, the same idea "
    "appears under different names in different groups, and comparisons across papers are often "
    "confounded by differences in models, data and evaluation harnesses.",
    "From an engineering point of view the main questions are familiar ones: how much memory and "
    "bandwidth the method needs, how it fails, how it is configured, and whether its behaviour can be "
    "observed well enough to debug a long run that goes wrong.",
    "There is also a question of scale. Results obtained with very large models and clusters do not "
    "always transfer downward, and a team with a few nodes should expect to revisit hyperparameters "
    "rather than copy them.",
    "The discussion below therefore mixes description with interpretation. Where the source is explicit "
    "the text says so; where the connection to {topic} is an inference, it is presented as one.",
    "Several of these points have been discussed in talks, issue trackers and follow-up work, and the "
    "community's understanding has shifted since the first release. The summary here reflects the "
    "version of the material that this page describes.",
    "It helps to keep a simple mental model in mind: data flows from generation to scoring to "
    "optimisation and back, and every design choice either shortens that loop, makes it cheaper, or "
    "makes the signal flowing through it more informative.",
    "Evaluation deserves its own caution. Benchmarks measure a narrow slice of behaviour, internal "
    "suites cannot be inspected from outside, and small differences in prompts or decoding settings can "
    "move scores by more than the effects being reported.",
    "Finally, some of the most important information is negative: what was tried and did not help, "
    "which settings were unstable, and which parts of the system needed the most engineering effort to "
    "make reliable.",
)

_DISCUSSION = (
    "Taken together, these points give a reasonably concrete picture of {short}, but they also leave "
    "gaps. Hyperparameters, data composition and failure cases are only partly documented, and some "
    "statements are easier to verify than others. A careful reader should treat the precise numbers as "
    "context-dependent and the qualitative mechanisms as the durable contribution."
)

# ---- site chrome -----------------------------------------------------------------------------
# Generic navigation, cookie, footer and appendix text in the style of each kind of site. It is
# deliberately low in topical vocabulary: a chunk ranker should learn to skip it.

_ARXIV_HEADER = (
    "Skip to main content\n\n"
    "We gratefully acknowledge support from our member institutions and from all contributors. Donate\n\n"
    "arXiv > cs > arXiv:{arxiv_id}\n\n"
    "Search or browse: All fields | Title | Author | Abstract | Comments | Journal reference | "
    "ACM classification | MSC classification | Report number | arXiv identifier | DOI | ORCID | "
    "Full text\n\n"
    "Help | Advanced Search | Login\n\n"
    "Computer Science > {primary_subject}"
)

_ARXIV_META = (
    "Comments: preprint; see the full text for page and figure counts\n\n"
    "Subjects: {subjects}\n\n"
    "Cite as: arXiv:{arxiv_id} [{primary_code}] (or arXiv:{arxiv_id}v1 for this version)\n\n"
    "Journal reference: not yet available | Related DOI: via DataCite (pending registration)"
)

_ARXIV_TAIL = (
    "## Submission history\n\n"
    "From: corresponding author [view email]\n"
    "[v1] {published_human} (full text and metadata available)\n\n"
    "## Access paper\n\n"
    "- View PDF\n- HTML (experimental)\n- TeX source\n- Other formats\n\n"
    "License: the authors have chosen a license for this article; see the license page for details.\n\n"
    "Current browse context: {primary_code} | < prev | next > | new | recent | by month\n\n"
    "Change to browse by: cs | cs.AI | cs.CL | cs.DC | stat\n\n"
    "## References and citations\n\n"
    "- NASA ADS\n- Google Scholar\n- Semantic Scholar\n\n"
    "Export BibTeX citation | Bookmark this article\n\n"
    "## Bibliographic and citation tools\n\n"
    "Bibliographic Explorer (what is the Explorer?) | Connected Papers (what is Connected Papers?) | "
    "Litmaps (what is Litmaps?) | scite Smart Citations (what are Smart Citations?)\n\n"
    "## Code, data and media associated with this article\n\n"
    "alphaXiv | CatalyzeX Code Finder for Papers | DagsHub | Gotit.pub | Hugging Face | Papers with Code "
    "| ScienceCast\n\n"
    "## Demos and related papers\n\n"
    "Replicate | Hugging Face Spaces | TXYZ.AI | Influence Flower | CORE Recommender | IArxiv "
    "Recommender\n\n"
    "## About arXivLabs\n\n"
    "arXivLabs is a framework that allows collaborators to develop and share new arXiv features directly "
    "on the website. Both individuals and organizations that work with arXivLabs have embraced and "
    "accepted the values of openness, community, excellence and user data privacy, and arXiv only works "
    "with partners that adhere to them. Have an idea for a project that will add value for the "
    "community? Learn more about arXivLabs.\n\n"
    "Which authors of this paper are endorsers? | Disable MathJax (What is MathJax?)\n\n"
    "About | Help | Contact | Subscribe | Copyright | Privacy Policy | Web Accessibility Assistance | "
    "arXiv Operational Status\n\n"
    "Get status notifications via email or slack"
)

_ARXIV_FILLERS = (
    "## Appendix A. Reproducibility notes\n\n"
    "The experiments summarised on this page depend on software versions, hardware and random seeds "
    "that are only partly reported. Where code is available, differences between the released code and "
    "the configuration used for the headline runs are common and are usually documented in issue "
    "trackers rather than in the paper itself. Readers attempting a reproduction should budget time for "
    "establishing a baseline that matches the reported numbers before changing anything.\n\n"
    "Reported variance across seeds is often small relative to the effects claimed, but the number of "
    "seeds is rarely large, and evaluation sets for reasoning benchmarks contain few problems, so "
    "single-point differences should not be over-interpreted.",
    "## Appendix B. Notation\n\n"
    "Throughout, a policy is a conditional distribution over the next token given the context. A "
    "trajectory or rollout is a sequence of tokens, possibly interleaved with tool outputs, generated by "
    "sampling from the policy. Rewards are scalar scores attached to whole trajectories unless stated "
    "otherwise, and advantages are rewards minus a baseline. KL divergences are written with the "
    "distribution being sampled from first. Expectations without a subscript are taken over the data "
    "distribution of the current stage.",
    "## Appendix C. Compute and hardware\n\n"
    "Compute budgets are reported in accelerator hours where the source gives them. Comparisons of "
    "wall-clock time across papers are unreliable because interconnect bandwidth, kernel quality and "
    "utilisation differ between clusters, and because some reports count only the main run while others "
    "include ablations and failed attempts.",
    "## Acknowledgements\n\n"
    "The authors thank colleagues who provided feedback on earlier drafts, the teams that maintain the "
    "open-source libraries used in the experiments, and the infrastructure groups who kept the "
    "clusters running. Any remaining errors are the authors' own.",
    "## Broader impact\n\n"
    "Methods that make training cheaper or more accessible lower the barrier for both beneficial and "
    "harmful uses. The authors do not release new model weights with this work beyond those described "
    "in the text, and they encourage evaluation of safety-relevant behaviour alongside capability "
    "benchmarks.",
)

_GITHUB_HEADER = (
    "Skip to content\n\n"
    "Navigation Menu: Product | Solutions | Resources | Open Source | Enterprise | Pricing\n\n"
    "Search or jump to...\n\n"
    "Sign in | Sign up\n\n"
    "You signed in with another tab or window. Reload to refresh your session. You signed out in another "
    "tab or window. Reload to refresh your session. Dismiss alert\n\n"
    "{owner} / {name} (Public)\n\n"
    "Notifications | Fork | Star\n\n"
    "Code | Issues | Pull requests | Discussions | Actions | Projects | Wiki | Security | Insights\n\n"
    "Branch: main | Branches | Tags | Go to file | Add file | Code\n\n"
    "Folders and files\n\n"
    "| Name | Last commit message |\n|---|---|\n"
    "| .github/ | ci: update workflow matrix |\n| docs/ | docs: refresh getting-started guide |\n"
    "| examples/ | examples: add multi-node configuration |\n| scripts/ | scripts: tidy launch helpers |\n"
    "| src/ | refactor: split configuration loading |\n| tests/ | tests: cover resume from checkpoint |\n"
    "| .gitignore | chore: ignore local caches |\n| .pre-commit-config.yaml | chore: bump hooks |\n"
    "| CONTRIBUTING.md | docs: clarify review process |\n| LICENSE | initial commit |\n"
    "| README.md | docs: update README |\n| pyproject.toml | build: pin minimum versions |\n\n"
    "Repository files navigation: README | Code of conduct | Contributing | License | Security"
)

_GITHUB_TAIL = (
    "## Citation\n\n"
    "If you use this project in your research, please cite the repository. A citation file in the "
    "repository root provides the preferred metadata; most reference managers can import it directly.\n\n"
    "```bibtex\n@software{{{name}_software,\n  title  = {{{name}}},\n"
    "  url    = {{https://github.com/{owner}/{name}}},\n  note   = {{GitHub repository}}\n}}\n```\n\n"
    "## About\n\n"
    "{title}\n\n"
    "Topics: machine-learning | pytorch | deep-learning | distributed-training | reinforcement-learning\n\n"
    "Resources: Readme | License | Code of conduct | Contributing | Security policy\n\n"
    "Activity | Custom properties | Stars | Watchers | Forks | Report repository\n\n"
    "## Releases\n\nSee the releases page for tagged versions and changelogs.\n\n"
    "## Packages\n\nNo packages published.\n\n"
    "## Used by\n\nDependent repositories are listed on the dependency graph page.\n\n"
    "## Contributors\n\nContributions from the maintainers and the open-source community.\n\n"
    "## Languages\n\nPython | Shell | Dockerfile | Other\n\n"
    "Footer: GitHub Homepage | Terms | Privacy | Security | Status | Community | Docs | Contact | "
    "Manage cookies | Do not share my personal information\n\n"
    "You can't perform that action at this time."
)

_GITHUB_FILLERS = (
    "## Development setup\n\n"
    "Clone the repository and create an isolated environment before installing the development "
    "dependencies. The test suite is split into fast unit tests and slower integration tests that need "
    "GPUs; continuous integration runs the fast suite on every pull request and the slow suite on a "
    "schedule.\n\n"
    "```bash\ngit clone https://github.com/{owner}/{name}.git\ncd {name}\npython -m venv .venv\n"
    "source .venv/bin/activate\npip install -e '.[dev]'\npytest -q tests/unit\n```\n\n"
    "Formatting and linting are enforced with pre-commit hooks. Please run them locally before "
    "opening a pull request.",
    "## Frequently asked questions\n\n"
    "**Which versions are supported?** The main branch tracks recent releases of PyTorch and the "
    "inference engines it integrates with. Older combinations may work but are not tested.\n\n"
    "**Can I use this on a single GPU?** Small configurations are provided for debugging on one device; "
    "realistic runs need multiple GPUs.\n\n"
    "**Where do I report a bug?** Open an issue with a minimal reproduction, the exact versions of the "
    "main dependencies and the full error message.\n\n"
    "**Is there a stable API?** Not yet. Public interfaces may change between minor releases; pin a "
    "version for anything long-running.",
    "## Roadmap\n\n"
    "Planned work is tracked in issues and milestones. Near-term priorities include broader model "
    "support, better documentation for multi-node setups, improved observability of long runs and more "
    "end-to-end examples. Priorities change with community feedback, so the roadmap is indicative "
    "rather than a commitment.",
    "## Community and support\n\n"
    "Questions are best asked in the discussions tab, where maintainers and other users can answer and "
    "where answers stay searchable. Please search existing discussions and issues first. For security "
    "problems, do not open a public issue; follow the process in the security policy instead.",
    "## Contributing\n\n"
    "Contributions are welcome. Please read the contributing guide, sign the contributor agreement if "
    "the project requires one, and discuss large changes in an issue before starting work. Pull "
    "requests should include tests and documentation updates where relevant.\n\n"
    "## License\n\nSee the LICENSE file in the repository root.",
)

_BLOG_HEADER = (
    "{site} | Product | Research | Blog | Docs | Pricing | Careers | Sign in | Download\n\n"
    "We use cookies and similar technologies to run this site, to understand how it is used and to "
    "improve it. You can accept all cookies, reject the optional ones, or choose your preferences. "
    "Accept all | Reject optional | Preferences\n\n"
    "Cookie preferences: Strictly necessary cookies keep the site working and cannot be switched off. "
    "Analytics cookies help us count visits and see which pages are popular, using aggregated data. "
    "Marketing cookies may be set by advertising partners to build a profile of your interests. Your "
    "choice is stored for twelve months. Save preferences\n\n"
    "Blog > {section}"
)

_BLOG_TAIL = (
    "Share this post: X | LinkedIn | Hacker News | Reddit | Copy link\n\n"
    "## Related posts\n\n{related}\n\n"
    "## Subscribe\n\n"
    "Get new posts about research and product updates in your inbox. We send a few emails a month and "
    "you can unsubscribe at any time. Email address | Subscribe\n\n"
    "## About the authors\n\n"
    "This post was written by members of the {site} research and engineering teams, with input from "
    "colleagues across infrastructure, evaluation and product. The teams work on training, serving and "
    "evaluating models, and on the systems that make large experiments reliable. We are hiring across "
    "research, infrastructure and product engineering; see the careers page for open roles.\n\n"
    "Product: Features | Enterprise | Pricing | Downloads | Changelog | Status\n\n"
    "Resources: Docs | Blog | Forum | Community | Learn | Security\n\n"
    "Company: About | Careers | Press | Brand | Contact\n\n"
    "Legal: Terms of service | Privacy policy | Data use | Acceptable use | Cookie settings\n\n"
    "Copyright notice: all rights reserved by the site owner."
)

_BLOG_FILLERS = (
    "## Frequently asked questions\n\n"
    "**Is this available today?** Availability, pricing and limits are listed in the product "
    "documentation and may change over time.\n\n"
    "**Where can I read more?** Longer technical write-ups, talks and code releases are linked from the "
    "research page when they are published.\n\n"
    "**How do I give feedback?** Use the feedback form in the product or contact the team through the "
    "community forum.\n\n"
    "**Will the details change?** Some numbers in this post describe a specific run and may be revised "
    "as the work continues.",
    "## Acknowledgements\n\n"
    "Many people contributed to the work described in this post, across research, infrastructure, "
    "data, evaluation, security and product. We also thank the open-source communities whose tools made "
    "it possible, and the early users who reported problems and suggested improvements.",
    "## Comments\n\n"
    "Comments are moderated. Please keep discussion on topic and follow the community guidelines. "
    "Sign in to join the discussion.\n\n"
    "Showing the most recent comments. Load more",
    "## Press and media\n\n"
    "For press enquiries, logos and product screenshots, see the media kit or contact the "
    "communications team. Please do not use the company's marks in ways that suggest endorsement.",
    "## Events\n\n"
    "Members of the team present this work at conferences, meetups and online talks. Upcoming dates, "
    "recordings and slides are collected on the events page; recordings are usually available a few "
    "weeks after each event.",
)

_DOCS_HEADER = (
    "{site} | Models | Datasets | Spaces | Community | Docs | Enterprise | Pricing | Log In | Sign Up\n\n"
    "Documentation: {section} | Search documentation | main | EN\n\n"
    "Getting started: Installation | Quickstart | Clarifying concepts | Dataset formats | Paper index\n\n"
    "Conceptual guides: Reducing memory usage | Speeding up training | Distributing training | "
    "Using trained models | Community tutorials\n\n"
    "Trainers: SFT | Reward modeling | DPO | KTO | ORPO | PPO | RLOO | GRPO | Online DPO | "
    "Generalized knowledge distillation | Nash-MD | XPO\n\n"
    "Integrations: vLLM | PEFT | DeepSpeed | Liger kernel | Unsloth | Environments | Experiment "
    "trackers\n\n"
    "API: Trainer classes | Configuration classes | Model classes | Callbacks | Data utilities | "
    "Judges | Text environments | Script utilities"
)

_DOCS_TAIL = (
    "< Previous page | Next page >\n\n"
    "Update on GitHub | Was this page helpful? Yes | No\n\n"
    "Join the community forum to ask questions about this page, or open an issue on the repository if "
    "something is wrong or missing.\n\n"
    "{site} | Company | About | Brand assets | Terms of service | Privacy | Careers | Forum | Blog | "
    "Learn | Status"
)

_DOCS_FILLERS = (
    "## Quick start\n\n"
    "Install the library, prepare a dataset of prompts and write one or more reward functions that take "
    "completions and return scores. Then create a configuration object, pass it to the trainer together "
    "with the model and the dataset, and call train. Logging to an experiment tracker is enabled through "
    "the usual reporting options.\n\n"
    "```python\nfrom datasets import load_dataset\n\ndataset = load_dataset('your/prompts', split='train')"
    "\n\ndef reward_len(completions, **kwargs):\n    return [-abs(200 - len(c)) for c in completions]\n```",
    "## Logged metrics\n\n"
    "The trainer logs the number of completion tokens, mean and standard deviation of rewards per reward "
    "function, the fraction of groups with zero reward variance, clipping ratios, the KL estimate when a "
    "reference model is used, the entropy of the policy and the learning rate. Watching the clipping "
    "ratios and the zero-variance fraction is a quick way to spot misconfigured runs.",
    "## Troubleshooting\n\n"
    "Out-of-memory errors usually come from the number of generations per prompt or the maximum "
    "completion length; reduce either, enable gradient checkpointing or move generation to a separate "
    "server. If rewards stay flat, check that the reward functions receive the fields you expect and that "
    "completions are not being truncated.",
    "## Common training arguments\n\n"
    "Besides its own options, the configuration class accepts the usual training arguments: "
    "learning_rate, per_device_train_batch_size, gradient_accumulation_steps, num_train_epochs, "
    "max_steps, warmup_ratio, lr_scheduler_type, logging_steps, save_steps, bf16, "
    "gradient_checkpointing, seed and report_to. Their meaning is the same as for any other trainer in "
    "the library.",
    "## Distributed training\n\n"
    "Multi-GPU and multi-node runs are launched with the standard launcher and a configuration file "
    "that selects DeepSpeed or FSDP. When generation runs in a separate server, reserve devices for it "
    "and make sure the server and the trainer agree on the model revision.",
)

# Filler shared by every kind of page, used last when a page is still short of its target size.
_GENERIC_FILLERS = (
    "## A note on terminology\n\n"
    "Different communities use different words for the same things. A rollout, a trajectory, an "
    "episode and a trace usually all mean a sequence produced by running a policy; a worker, a node, a "
    "replica and an island can all mean a unit of compute that trains or generates independently. This "
    "page follows the wording of its source where possible and otherwise uses the most common term. "
    "Where two terms are used side by side, no difference in meaning is intended.",
    "## How to read this page\n\n"
    "The summary at the top gives the gist. The middle sections contain the specific mechanisms and "
    "results, and they are the parts to quote or check. The remaining sections provide context, "
    "practical notes and links, and can be skipped by readers who already know the area. Numbers are "
    "reported as the source states them; they have not been re-measured.",
    "## Page history\n\n"
    "This page has been revised since it first appeared: typos were corrected, broken links were "
    "repaired and a few sentences were reworded for clarity. No substantive claims were changed in "
    "those revisions. If you find an error, please report it through the feedback link in the footer.",
    "## Accessibility\n\n"
    "We aim to make this site usable for everyone. Pages are designed to work with screen readers and "
    "keyboard navigation, images carry text alternatives where they convey information, and code "
    "samples are provided as text rather than screenshots. Tell us if something does not work for you.",
)

# The "reference list" block on every page: a few well-known pages from other topics, titles only.
_REFERENCE_HEADINGS = {
    "paper": "## References",
    "repo": "## Acknowledgements and related software",
    "docs": "## Paper index",
    "blog": "## Further reading",
}


def _seed(url: str, salt: str) -> int:
    """Stable integer from the URL: the only source of variation between pages."""
    digest = hashlib.sha256(f"{salt}\x00{url}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _rotate(options: Sequence[str], url: str, salt: str, n: int) -> str:
    """The n-th option of a URL-specific rotation; step 5 is coprime with 12, so no repeats within 12."""
    return options[(_seed(url, salt) + 5 * n) % len(options)]


def _human_date(iso: str | None) -> str:
    """'2023-11-14' -> '14 Nov 2023' without locale-dependent strftime."""
    if not iso:
        return "undated"
    year, month, day = iso.split("-")
    return f"{int(day)} {_MONTHS[int(month) - 1]} {year}"


def _short_title(title: str) -> str:
    """The part of a title before a colon, which reads naturally inside running text."""
    return title.split(":", 1)[0].strip()


def _first_sentence(text: str) -> str:
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def _kind(host: str, path: str) -> str:
    if host == "arxiv.org":
        return "paper"
    if host == "github.com":
        return "repo"
    if "/docs/" in path:
        return "docs"
    return "blog"


def _site_name(host: str) -> str:
    if host in _SITE_NAMES:
        return _SITE_NAMES[host]
    labels = host.split(".")
    core = labels[-2] if len(labels) >= 2 else host
    return core.replace("-", " ").title()


def _split_points(points: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """Spread key points over three sections, the middle one getting the most (where the 'meat' is)."""
    n = len(points)
    first = 1 if n >= 4 else 0
    last = 1 if n >= 3 else 0
    return list(points[:first]), list(points[first : n - last]), list(points[n - last :])


class _Composer:
    """Turns one JSON entry into a full page. Stateless apart from the topic and sibling tables."""

    def __init__(self, topics: dict[str, dict[str, Any]], entries: list[dict[str, Any]]) -> None:
        self._topics = topics
        self._entries = entries

    # -- pieces ----------------------------------------------------------------------------------
    def _background(self, topic: str, url: str) -> list[str]:
        paras = [str(p) for p in self._topics[topic]["background"]]
        start = _seed(url, "bg") % len(paras)
        return paras[start:] + paras[:start]

    def _rotated(self, entries: list[dict[str, Any]], url: str, salt: str, limit: int) -> list[dict[str, Any]]:
        ordered = sorted(entries, key=lambda e: str(e["url"]))
        if not ordered:
            return []
        start = _seed(url, salt) % len(ordered)
        return (ordered[start:] + ordered[:start])[:limit]

    def _related(self, entry: dict[str, Any]) -> str:
        """Same-topic pages with a one-sentence description (a 'related posts' style block)."""
        topic = entry["topics"][0]
        same = [e for e in self._entries if topic in e["topics"] and e["url"] != entry["url"]]
        chosen = self._rotated(same, entry["url"], "rel", 4)
        return "\n".join(f"- [{e['title']}]({e['url']}): {_first_sentence(e['synopsis'])}" for e in chosen)

    def _references(self, entry: dict[str, Any]) -> str:
        """Titles of pages from other topics: realistic bibliography noise with little topical weight."""
        mine = set(entry["topics"])
        other = [e for e in self._entries if not mine.intersection(e["topics"])]
        chosen = self._rotated(other, entry["url"], "refs", 9)
        return "\n".join(f"- {e['title']}. {e['url']}" for e in chosen)

    # -- page ------------------------------------------------------------------------------------
    def page(self, entry: dict[str, Any], hostile: bool, injections: Sequence[str]) -> Page:
        url = str(entry["url"])
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        kind = _kind(host, parts.path)
        topics = tuple(str(t) for t in entry["topics"])
        topic = topics[0]
        topic_title = str(self._topics[topic]["title"])
        title = str(entry["title"])
        short = _short_title(title)
        synopsis = str(entry["synopsis"])
        published = entry.get("published")
        key_points = tuple(str(p) for p in entry["key_points"])
        site = _site_name(host)
        path_bits = [b for b in parts.path.split("/") if b]
        subjects = _SUBJECTS[topic]
        fmt = {
            "arxiv_id": path_bits[-1] if path_bits else "",
            "owner": path_bits[0] if path_bits else "",
            "name": path_bits[1] if len(path_bits) > 1 else "",
            "site": site,
            "title": title,
            "published_human": _human_date(published),  # also used in the submission-history block
            "subjects": subjects,
            "primary_subject": subjects.split(";")[0].rsplit(" (", 1)[0],
            "primary_code": subjects.split(";")[0].rsplit("(", 1)[-1].rstrip(")"),
            "section": path_bits[1].upper() if kind == "docs" and len(path_bits) > 1 else "Research",
            "related": self._related(entry),
        }
        published_human = fmt["published_human"]
        background = self._background(topic, url)
        conn = [_rotate(_CONNECTIVES, url, "conn", i).format(short=short, topic=topic_title) for i in range(6)]
        discussion = _DISCUSSION.format(short=short)
        references = f"{_REFERENCE_HEADINGS[kind]}\n\n{self._references(entry)}"

        counter = iter(range(len(key_points)))

        def facts(points: Sequence[str], bullet: bool = False) -> list[str]:
            """Key points with URL-rotated lead-ins; a page-wide counter keeps lead-ins distinct."""
            out = [f"{_rotate(_LEADS, url, 'lead', next(counter))} {p}" for p in points]
            return [f"- {p}" for p in out] if bullet else out

        intro_pts, core_pts, end_pts = _split_points(key_points)
        half = (len(core_pts) + 1) // 2
        head: list[str] = []
        body: list[str] = []
        fillers: list[str] = []
        tail: list[str] = []
        abstract_page = None
        if kind == "paper":
            submitted = f"Submitted on {published_human}" if published else "Submission date: see submission history"
            # The abstract page is what arXiv serves at /abs/: the abstract and the site's chrome, no paper.
            abstract_page = "\n\n".join([_ARXIV_HEADER.format(**fmt), f"# {title}", submitted,
                                          f"## Abstract\n\n{synopsis}", _ARXIV_META.format(**fmt),
                                          _ARXIV_TAIL.format(**fmt)]) + "\n"
            head += [f"# {title}", submitted, f"## Abstract\n\n{synopsis}"]
            body += ["## 1 Introduction", background[0], *facts(intro_pts), conn[0]]
            body += ["## 2 Method", *facts(core_pts[:half]), conn[1]]
            body += ["## 3 Results", *facts(core_pts[half:]), conn[2]]
            body += ["## 4 Discussion and limitations", *facts(end_pts), discussion]
            fillers += ["## 5 Extended background\n\n" + "\n\n".join(background[1:3]), conn[3]]
            fillers += [_ARXIV_FILLERS[0], conn[4], _ARXIV_FILLERS[1], _ARXIV_FILLERS[2]]
            fillers += ["\n\n".join(background[3:]), conn[5], *_ARXIV_FILLERS[3:], *_GENERIC_FILLERS]
            tail += [f"## Related work\n\n{fmt['related']}", references, _ARXIV_META.format(**fmt)]
        elif kind == "repo":
            head += [
                _GITHUB_HEADER.format(**fmt),
                f"# {fmt['name']}\n\n{title}",
                "build: passing | docs: latest | license | python: 3.10+ | discussions",
                f"## Overview\n\n{synopsis}",
            ]
            body += ["## Why this project exists", background[0], *facts(intro_pts), conn[0]]
            body += ["## Highlights", *facts(core_pts, bullet=True), conn[1]]
            body += [
                "## Installation\n\n```bash\npip install -U pip\n"
                f"pip install git+https://github.com/{fmt['owner']}/{fmt['name']}.git\n```\n\n"
                "Some features need optional extras and a recent CUDA toolkit; see the documentation for "
                "the supported matrix of versions.",
                "## Status and limitations",
                *facts(end_pts),
                discussion,
            ]
            fillers += ["## Background\n\n" + "\n\n".join(background[1:3]), conn[2]]
            fillers += [_GITHUB_FILLERS[0].format(**fmt), conn[3], *_GITHUB_FILLERS[1:3]]
            fillers += [conn[4], "\n\n".join(background[3:]), *_GITHUB_FILLERS[3:], conn[5]]
            fillers += [*_GENERIC_FILLERS]
            tail += [f"## Related projects\n\n{fmt['related']}", references, _GITHUB_TAIL.format(**fmt)]
        elif kind == "docs":
            head += [_DOCS_HEADER.format(**fmt), f"# {title}", f"## Overview\n\n{synopsis}"]
            body += ["## Background", background[0], *facts(intro_pts), conn[0]]
            body += ["## How the trainer works", *facts(core_pts), conn[1]]
            body += ["## Notes and caveats", *facts(end_pts), discussion]
            fillers += [_DOCS_FILLERS[0], conn[2], *_DOCS_FILLERS[1:3]]
            fillers += ["## Further background\n\n" + "\n\n".join(background[1:3]), conn[3]]
            fillers += [*_DOCS_FILLERS[3:], conn[4], "\n\n".join(background[3:]), conn[5]]
            fillers += [*_GENERIC_FILLERS]
            tail += [f"## See also\n\n{fmt['related']}", references, _DOCS_TAIL.format(**fmt)]
        else:
            minutes = 8 + _seed(url, "read") % 9
            head += [
                _BLOG_HEADER.format(**fmt),
                f"# {title}",
                (f"Published {published_human} | " if published else "") + f"{site} team | {minutes} min read",
                synopsis,
            ]
            body += ["## Why this matters", background[0], *facts(intro_pts), conn[0]]
            body += ["## How it works", *facts(core_pts[:half]), conn[1]]
            body += ["## What we found", *facts(core_pts[half:]), conn[2]]
            body += ["## Limitations and what comes next", *facts(end_pts), discussion]
            fillers += ["## Some background\n\n" + "\n\n".join(background[1:3]), conn[3]]
            fillers += [_BLOG_FILLERS[0], conn[4], *_BLOG_FILLERS[1:3]]
            fillers += ["\n\n".join(background[3:]), conn[5], *_BLOG_FILLERS[3:], *_GENERIC_FILLERS]
            tail += [references, _BLOG_TAIL.format(**fmt)]

        if injections:
            head, body, tail = _inject(head, body, tail, injections)
        content = _fit(url, head, body, fillers, tail)
        return Page(
            url=url,
            title=title,
            topics=topics,
            synopsis=synopsis,
            content=content,
            published=str(published) if published else None,
            hostile=hostile,
            key_points=key_points,
            abstract_page=abstract_page,
        )


def _inject(
    head: list[str], body: list[str], tail: list[str], injections: Sequence[str]
) -> tuple[list[str], list[str], list[str]]:
    """Spread injection strings over the page (top, inside the body, near and in the footer).

    Why spread them: a defence that only inspects the beginning or the end of a page, or only the
    chunks a ranker picks, must still meet at least one of them.
    """
    head, body, tail = list(head), list(body), list(tail)
    for i, text in enumerate(injections):
        slot = i % 4
        if slot == 0:
            head.insert(min(2, len(head)), text)
        elif slot == 1:
            body.insert(min(len(body), 2 + i), text)
        elif slot == 2:
            body.append(text)
        else:
            tail.insert(0, text)
    return head, body, tail


def _fit(url: str, head: list[str], body: list[str], fillers: list[str], tail: list[str]) -> str:
    """Add filler blocks until the page reaches its (URL-derived) target size.

    Why a per-page target: realistic pages differ in length; a constant size would make chunk counts
    identical for every page and hide ranker bugs. Raising on out-of-range sizes keeps data edits honest.
    """
    target = MIN_CONTENT_CHARS + 400 + _seed(url, "size") % 3_200
    text = ""
    for used in range(len(fillers) + 1):
        blocks = [b for b in (*head, *body, *fillers[:used], *tail) if b.strip()]
        text = "\n\n".join(blocks) + "\n"
        if len(text) >= target:
            break
    if not MIN_CONTENT_CHARS <= len(text) <= MAX_CONTENT_CHARS:
        raise ValueError(f"composed page for {url} is {len(text)} characters; adjust corpus data")
    return text
