"""Render docs/PERFORMANCE.md from build/bench.json (called by `scripts/dev/bench.py --write-doc`).

Only formatting lives here; every number comes from the JSON that one bench run wrote. Text that
explains a missed goal is written only when that goal was missed on the run being rendered.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_leg import SECTIONS as LEG_SECTIONS  # the research leg's figures (issue 32)

REPRODUCE = ".venv/bin/python scripts/dev/bench.py --write-doc"


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|")


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "—"


def _leg_row(label: str, leg: dict[str, Any]) -> str:
    return (f"| {label} | {leg['calls']} | {_n(leg['prompt_tokens'])} | {_n(leg['cached_tokens'])} "
            f"({_pct(leg['cached_tokens'], leg['prompt_tokens'])}) | {_n(leg['distinct_tokens'])} | "
            f"**{leg['amplification']:.2f}** | ${leg['cost_usd']:.4f} | {leg['cited']} |")


def _section_parallel(f: dict[str, Any]) -> list[str]:
    d = f["details"]
    return [f"Walls (s): 1 leg {d['wall_1_leg_s']}, 8 legs {d['wall_8_legs_s']}. Gateway calls: "
            f"{d['gateway_calls']['1 leg']} for 1 leg, {d['gateway_calls']['8 legs']} for 8; a leg's floor is "
            f"{d['ideal_s']} s of latency."]


def _section_overhead(f: dict[str, Any]) -> list[str]:
    d = f["details"]
    return [f"Median per call: ours {d['ours_ms']} ms, bare streamed client {d['bare_ms']} ms "
            f"({d['calls']} calls each)."]


def _section_cli(f: dict[str, Any]) -> list[str]:
    d = f["details"]
    return [f"Medians: `research-dispatch --help` {d['help_ms']} ms, `python -c \"import click\"` "
            f"{d['import_click_ms']} ms ({d['repeats']} runs each)."]


def _section_command_start(f: dict[str, Any]) -> list[str]:
    d = f["details"]
    lines = ["| command | median | × `import click` |", "|---|---:|---:|"]
    lines += [f"| `{_md(name)}` | {d['ms'][name]} ms | {ratio:.2f}× |" for name, ratio in d["ratios"].items()]
    lines += [f"| `python -c \"import click\"` | {d['ms']['click']} ms | 1.00× |", "",
              "What each imports: `python -X importtime -m research_dispatch check --repo tests/data/v0.1.0` "
              "(tests/test_light_imports.py holds them to no client library)."]
    return lines


def _section_amplification(f: dict[str, Any]) -> list[str]:
    d = f["details"]
    ours, naive = d["ours"], d["naive"]
    lines = ["| loop | calls | prompt tokens | of which cached | distinct content | amplification | cost (fake "
             "prices) | sources cited |", "|---|---:|---:|---:|---:|---:|---:|---:|",
             _leg_row("ours (`run_leg`)", ours), _leg_row("naive (economy lifted)", naive), ""]
    per_call = ours["per_call_prompt_tokens"]
    lines.append(f"Ours sends {naive['prompt_tokens'] / ours['prompt_tokens']:.1f}× fewer prompt tokens than the "
                 f"naive loop on the same leg. Prompt tokens per call, ours: first {_n(per_call[0])}, "
                 f"largest {_n(max(per_call))}, last {_n(per_call[-1])}; naive: last "
                 f"{_n(naive['per_call_prompt_tokens'][-1])}. New content a step brings (ours, median): "
                 f"{ours['median_new_tokens_per_step']:.0f} tokens.")
    return lines


def _section_synthesis(f: dict[str, Any]) -> list[str]:
    lines = ["| reports | cold: calls (extract + judge + check) | claims | batch | citations judged | bound | cold "
             "wall | unchanged re-run: calls | one report changed: extract + judge + check |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in f["details"]["sizes"]:
        cold, same, one = row["cold"], row["unchanged"], row["one_changed"]
        lines.append(f"| {row['reports']} | {cold['llm_calls']} ({cold['extraction_calls']} + {cold['judge_calls']} "
                     f"+ {cold['check_calls']}) | {_n(cold['claims'])} | {cold['batch_size']} | "
                     f"{_n(cold['citations_judged'])} | {cold['bound']} + {f['details']['constant']} | "
                     f"{cold['wall_s']:.2f} s | {same['llm_calls']} | {one['extraction_calls']} + "
                     f"{one['judge_calls']} + {one['check_calls']} |")
    lines += ["", "The bound is `reports + ⌈claims / batch_size⌉ + Σ ⌈judged citations / 12⌉`: one extraction per "
                  "report, one judge call per batch of claims, and each report's citations checked in calls of at "
                  "most 12 (synthesis/check/citations.py). Each report variant carries the evidence file of the leg "
                  "it was made from, so its citations are checked as a real report's are. A changed report is "
                  "re-extracted and re-checked alone; the judge batches its claims touch are judged again."]
    return lines


def _section_matrix(f: dict[str, Any]) -> list[str]:
    d = f["details"]
    batch = d["batch"]
    return [f"`plan` walls (s): {d['wall_s']}; {d['legs']} legs → {d['entries']} entries; every leg in exactly one "
            f"entry: {'yes' if d['every_leg_exactly_once'] else 'NO'}. Entry `{batch['entry']}` ran as one "
            f"`research` batch: exit {batch['exit_code']}, {len(batch['reports'])} reports, {batch['wall_s']} s. "
            f"A team with 100 topics × 3 models ({d['team_100x3']['legs']} legs) gets "
            f"{d['team_100x3']['entries']} entries."]


def _section_tokens(f: dict[str, Any]) -> list[str]:
    d = f["details"]
    lines = ["| topic | calls | prompt tokens | of which cached | completion tokens | words | sources cited | "
             "of which read | cost (fake prices) |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for leg in d["legs"]:
        lines.append(f"| {leg['topic']} | {leg['calls']} | {_n(leg['prompt_tokens'])} | "
                     f"{_n(leg['cached_tokens'])} | {_n(leg['completion_tokens'])} | {_n(leg['words'])} | "
                     f"{leg['cited']} | {leg['pages_read']} | ${leg['cost_usd']:.4f} |")
    peer = d["peer"]
    whole = d["whole_pages_reference"]
    lines += [f"| *gpt-researcher 0.16.1 (issue 7)* | | *{_n(peer['prompt_tokens'])}* | | "
              f"*{_n(peer['completion_tokens'])}* | *~2,150* | *{peer['cited']}* | *{peer['pages_read']} read* | |",
              "",
              f"The same diloco-family leg with the economy lifted (whole snippets and pages, every result resent): "
              f"{_n(whole['prompt_tokens'])} prompt tokens. Sources cited are those of the report's `sources` "
              "(`finalize_citations` keeps only retrieved ones); *of which read* are those whose page passages the "
              "leg read with `web_extract` — the rest were cited from their search snippets. The fake writer cites "
              "every source it was shown; a real model's citing is its own."]
    return lines


def _section_prompt_cache(f: dict[str, Any]) -> list[str]:
    d = f["details"]
    return ["| leg | calls | prompt tokens | read from cache | cost |", "|---|---|---|---|---|",
            *(f"| {label} | {leg['calls']} | {_n(leg['prompt_tokens'])} | {_n(leg['cached_tokens'])} "
              f"({_pct(leg['cached_tokens'], leg['prompt_tokens'])}) | ${leg['cost_usd']:.4f} |"
              for label, leg in (("with breakpoints", d["ours"]), ("without", d["without_breakpoints"])))]


def _section_verification(f: dict[str, Any]) -> list[str]:
    d = f["details"]
    return ["| run | citation-check calls | citations cached | research legs' prompt tokens | citation checks' prompt "
            "tokens |", "|---|---|---|---|---|",
            f"| cold | {d['cold']['check_calls']} | {d['cold'].get('cached_checks', 0)} | "
            f"{_n(d['research_prompt_tokens'])} | {_n(d['check_prompt_tokens'])} "
            f"({_pct(d['check_prompt_tokens'], d['research_prompt_tokens'])}) |",
            f"| unchanged reports | {d['unchanged']['check_calls']} | {d['unchanged'].get('cached_checks', 0)} "
            "| — | 0 |"]


def _section_realism(f: dict[str, Any]) -> list[str]:
    d = f["details"]
    lines = ["| seed | family-picks kept (row) | kept (any cluster) | convergent decisions kept | dissents shown | "
             "limitations listed |", "|---:|---:|---:|---:|---:|---:|"]
    for i in range(len(d["kept"])):
        lines.append(f"| {i + 1} | {d['kept'][i]}/{len(d['expected'])} | {d['kept_any_cluster'][i]}/"
                     f"{d['expected_any']} | {d['convergent_kept'][i]}/{len(d['convergent_expected'])} | "
                     f"{d['dissents_kept'][i]}/{len(d['dissents_expected'])} | {d['limitations'][i]} |")
    lines += ["", f"Family-picks with perfect answers: {', '.join(d['expected'])}."]
    return lines


def _section_false_support(f: dict[str, Any]) -> list[str]:
    d = f["details"]
    lines = ["| case |", "|---|"] + [f"| {_md(case)} |" for case in d["cases"]]
    for judge in ("agreeable", "obedient"):
        lines += ["", f"Standing with the {judge} judge: {'; '.join(d[judge]) or 'none'}."]
    return lines


def _section_reextraction(f: dict[str, Any]) -> list[str]:
    d = f["details"]
    lines = ["| seed | extraction calls | decisions changed by the research | moved only by re-extraction | "
             "lost a supported citation (research) | first line says re-extracted |", "|---:|---:|---:|---:|---:|---|"]
    for run in d["runs"]:
        moved = "—" if run["moved_decisions"] is None else str(run["moved_decisions"])
        lines.append(f"| {run['seed']} | {run['extraction_calls']} | {run['decisions']} | {moved} | "
                     f"{run['lost_citations']} | {'yes' if run['says_reextracted'] else 'no'} |")
    return lines


SECTIONS = {"parallel": _section_parallel, "overhead": _section_overhead, "cli_start": _section_cli,
            "command_start": _section_command_start,
            "amplification_reading": _section_amplification, "amplification_searching": _section_amplification,
            "synthesis": _section_synthesis, "matrix": _section_matrix, "tokens_per_report": _section_tokens,
            "verification": _section_verification, "prompt_cache": _section_prompt_cache,
            "realism": _section_realism, "false_support": _section_false_support,
            "reextraction": _section_reextraction, **LEG_SECTIONS}


def _what_it_would_take(f: dict[str, Any]) -> str:
    key, d = f["key"], f["details"]
    if key in ("amplification_searching", "amplification_reading"):
        ours, naive = d["ours"], d["naive"]
        fixed = d["fixed_prompt_tokens"]
        fixed_share = fixed * ours["calls"] / ours["distinct_tokens"]
        write = ours["per_call_prompt_tokens"][-1]
        research = (ours["prompt_tokens"] - write) / ours["distinct_tokens"]
        text = (
            f"Since issue 32 the report is written in one last call from a dossier of every passage the leg was "
            f"shown ({_n(write)} prompt tokens here): by construction that call sends the leg's tool content a "
            f"second time, which this ratio counts as amplification; without it the leg measures "
            f"{research:.2f}. The fixed prompt ({_n(fixed)} tokens: system prompt, brief and tool schemas) comes "
            f"to {fixed_share:.1f}× the distinct content over the leg's {ours['calls']} calls. What the economy "
            f"buys: {naive['prompt_tokens'] / ours['prompt_tokens']:.1f}× fewer prompt tokens than the naive loop "
            f"({_n(ours['prompt_tokens'])} vs {_n(naive['prompt_tokens'])}), "
            f"{_pct(ours['cached_tokens'], ours['prompt_tokens'])} of them read from the provider's cache.")
        if key == "amplification_searching":
            text += (f" The stall rule ends this leg's searching after three searches in a row find nothing new "
                     f"(new sources per search: {ours['new_sources_per_search']}); figure L4 compares it with main. "
                     "The naive loop, whose searches show every result in full, finds and cites more of the "
                     "corpus's other topics' pages.")
        return text
    generic = {
        "parallel": "Profile the legs' CPU under `--jobs 8` (per-leg client set-up, report parsing for the route "
                    "table, trace writing) and move what remains into worker processes if threads cannot hide it.",
        "overhead": "Profile `Gateway.complete` against the bare call and remove per-call work that is not "
                    "provenance (e.g. repeated provider look-ups).",
        "cli_start": "Find the import with `python -X importtime -m research_dispatch --help` and make it lazy.",
        "command_start": "Find what the slowest command imports with `python -X importtime -m research_dispatch "
                         "<command> --repo tests/data/v0.1.0` and move the types it needs below the transports.",
        "amplification_reading": "Lower the context budget or compact read passages further.",
        "synthesis": "Check which stage exceeded one call per report or per batch in the per-size table.",
        "matrix": "Profile `plan` on the 1,000-leg repository (topic loading dominates).",
        "tokens_per_report": "Tighten the per-search snippet budget or the per-read passage budget, or compact "
                             "search leads once their pages have been read.",
        "verification": "Send each citation fewer passages (the most relevant excerpt only) or check several "
                        "claims of one source in one item.",
        "realism": "Find the seed and the family-pick lost in build/bench.json, replay that synthesis with the fake's "
                   "`realism` setting, and read the claim's limitation line: it names why the claim was dropped.",
        "false_support": "Read the standing case's citation check in the ledger (`citation_checks`): the judge's "
                         "answer, the sentence code took and why it stood.",
        "reextraction": "Find the decision the research diff lists for the re-extracted seed in build/bench.json and "
                        "the reports its sides name: one of them must have changed, or the attribution is wrong.",
        "prompt_cache": "Compact less often (each compaction rewrites the history after it), or place the "
                        "rolling breakpoint further back so that more of each step's prompt is a read.",
    }
    return generic.get(key, "")


def render(data: dict[str, Any]) -> str:
    figures = data["figures"]
    machine = data["machine"]
    met = sum(1 for f in figures if f["met"])
    out = [
        "# Performance: speed, cost and scale of a refresh",
        "",
        "A refresh costs time (legs should run as parallel as the gateway allows), money (an agent loop that "
        "resends a growing history pays quadratically for it, and so does a synthesis that compares every claim "
        "with every other) and scale (GitHub caps a matrix at 256 jobs). `scripts/dev/bench.py` measures all three "
        "on the offline fakes (docs/FAKES.md): the real product and the real `openai` and `tavily-python` "
        "clients over HTTP, scripted latency, and the fake gateway's token accounting. Every figure is a ratio "
        "or a count measured in the same run, next to its goal from issue 7.",
        "",
        "Generated by `scripts/dev/bench.py --write-doc` from `build/bench.json` — do not edit by hand. Reproduce "
        f"with `{REPRODUCE}` (about a minute; `make bench` prints the table without rewriting this file; "
        "`--only N` runs one figure).",
        "",
        f"Machine of this run: {machine['cores']} cores, {machine['implementation']} {machine['python']}, "
        f"{_md(machine['platform'])}; the whole bench took {data['elapsed_s']:.0f} s"
        + (" (`--quick`)" if data.get("quick") else "") + ".",
        "",
        f"**{met} of {len(figures)} goals met.**",
        "",
        "| # | figure | measured | goal | met |",
        "|---|---|---|---|---|",
    ]
    for f in figures:
        out.append(f"| [{f['id']}](#{f['id']}) | {_md(f['figure'])} | {_md(f['display'])} | {_md(f['goal'])} | "
                   f"{'✅ met' if f['met'] else '❌ missed'} |")
    out += [
        "",
        "## Definitions",
        "",
        "* **Prompt tokens** are what the fake gateway bills: per call, ⌈characters / 4⌉ over every message's "
        "content and every tool-call argument string, plus the tool schemas (canonical JSON). Tokens the "
        "provider serves from its prompt cache are *included* (they are sent); they are shown separately "
        "because providers bill them at a discount (the fake: 25 %, after a 1,024-token common prefix per "
        "session).",
        "* **Distinct content** of a leg is each piece of content counted once: the tool schemas, the system "
        "prompt and the brief, each tool result as first returned, each model output (text and tool-call "
        "arguments), each follow-up the product sends (band corrections, continuations), and the last model "
        "output — characters / 4, as billed. **Token amplification** is prompt tokens ÷ distinct content (the "
        "writing call's dossier resends the passages once more, and counts): "
        "1 would mean nothing is ever sent twice; a loop that resends its whole history pays about "
        "(steps − 1) / 2.",
        "* **The naive loop** (figure 4's reference) is the same leg through the same classes "
        "(`Researcher`, `SearchTools`, `Gateway`) with the token economy lifted: no compaction, no "
        "deduplication, whole snippets and whole pages.",
        "* **Scenarios** are fake-gateway scripts (docs/FAKES.md): the standard scenario is `searches: 5` (two "
        "a turn) and one reading turn of five pages (`extract_top: 5`); the 30-step *reading* leg searches six "
        "times and then reads three pages a turn (`reads: 23`), each read asking another question; the "
        "30-step *searching* leg searches 26 times, one a turn, then reads once. Both run with "
        "`budget: {max_steps: 30}`. Corpus pages are 10–15k characters. Issue 7 asks for *a* scripted 30-step "
        "leg and expects a naive loop near 15, which presumes every step brings new content; on a corpus of 30 "
        "pages only reading does, so both legs are measured: the reading leg, and the searching leg as first "
        "suggested, where most searches find nothing new.",
        "",
        "## How the figures are won",
        "",
        "* Parallel legs: legs are threads over I/O; each leg's `openai` client reuses one process-wide TLS "
        "context instead of loading the CA bundle again (about 15 ms of CPU per leg, which serialised under "
        "the GIL when eight legs started together).",
        "* Tokens: a search result is a lead — title, URL and a snippet of at most 200 characters cut at a "
        "sentence end; a source already shown is listed by id, not sent again; the query is echoed only when "
        "it was changed. A page is read as its passages most relevant to the question (BM25 over paragraph "
        "chunks, link lists discounted), at most 2,400 characters a page and 6,000 a call, and reading it "
        "again returns its next passages, never the same ones. Once tool results in the history pass 10,000 "
        "characters, the oldest outside the last two tool turns are compacted — search leads first — in one "
        "go down to half the budget, so the prompt prefix (and the provider's cache of it) changes seldom; a "
        "compacted result keeps every source id citable. The report does not read the compacted history: it is "
        "written in one call, without tools, from a dossier of every passage shown (issue 32). Searching stops "
        "when three searches in a row find no new source.",
        "* Synthesis: one structured extraction per report (cached by content), one judge call per batch of "
        "claims; classification in code.",
        "* Scale: more than 256 legs are packed into at most 256 matrix entries, each run by `research` as a "
        "batch.",
        "",
    ]
    for f in figures:
        out += [f'<a id="{f["id"]}"></a>', "", f"## {f['id']}. {f['figure']}", "",
                f"**{_md(f['display'])}** — goal {_md(f['goal'])}: {'met' if f['met'] else '**missed**'}.", "",
                f"Method: {f['method']} Reproduce: `{f['command']}`.", ""]
        out += SECTIONS[f["key"]](f)
        out.append("")
        if not f["met"]:
            out += [f"**Why it is missed.** {f['why'][:1].upper() + f['why'][1:]}", "",
                    f"**What it would take.** {_what_it_would_take(f)}", ""]
    return "\n".join(out).rstrip() + "\n"
