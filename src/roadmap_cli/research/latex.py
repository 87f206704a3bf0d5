"""LaTeX text in BibTeX fields <-> the plain text the paper log stores.

Reading turns what reference managers write into what a person would type:
accents (`{\\"u}`, `\\'{e}`, `\\"\\i`) become composed letters, the special
letters (`{\\ss}`, `{\\o}`, `{\\aa}`, `{\\L}`) become ß ø å Ł, formatting
commands (`\\textbf{bold {inner}}`) leave only their text, and grouping braces
go. Writing escapes exactly what would break a BibTeX value, so that
export -> import gives back the same text.
"""

from __future__ import annotations

import re
import unicodedata

# Accent commands and the combining character each puts on its letter.
_ACCENTS = {
    '"': "\u0308",
    "'": "\u0301",
    "`": "\u0300",
    "^": "\u0302",
    "~": "\u0303",
    "=": "\u0304",
    ".": "\u0307",
    "c": "\u0327",
    "v": "\u030c",
    "u": "\u0306",
    "H": "\u030b",
    "r": "\u030a",
    "k": "\u0328",
    "d": "\u0323",
    "b": "\u0331",
}
# `\"u`, `{\"u}`, `\"{u}`, `{\"{u}}`, `\c c`, `\"\i`, `\"{\i}`: the letter may be
# a dotless i/j (`\i`), which takes the accent as a plain i/j.
_ACCENT = re.compile(r"\{?\\([\"'`^~=.]|[cvuHrkdb](?=[\s{\\]))\s*\{?(\\[ij](?![A-Za-z])|[A-Za-z])\s*\}?\}?")
# Letters that are commands of their own; `\ss` eats the space after it, as in TeX.
_LETTERS = {
    "ss": "ß",
    "SS": "SS",
    "o": "ø",
    "O": "Ø",
    "aa": "å",
    "AA": "Å",
    "ae": "æ",
    "AE": "Æ",
    "oe": "œ",
    "OE": "Œ",
    "l": "ł",
    "L": "Ł",
    "i": "ı",
    "j": "ȷ",
    "dh": "ð",
    "DH": "Ð",
    "th": "þ",
    "TH": "Þ",
    "ng": "ŋ",
    "NG": "Ŋ",
    # a few symbols that titles use
    "textendash": "–",
    "textemdash": "—",
    "ldots": "…",
    "dots": "…",
    "textellipsis": "…",
    "textquoteright": "’",
    "textquoteleft": "‘",
    "textregistered": "®",
    "texttrademark": "™",
    "textdegree": "°",
    "S": "§",
    "P": "¶",
    "LaTeX": "LaTeX",
    "TeX": "TeX",
}
_LETTER = re.compile(r"\\(" + "|".join(sorted(_LETTERS, key=len, reverse=True)) + r")(?![A-Za-z])[ \t]*(?:\{\})?")
# `\&` and friends are the characters themselves.
_ESCAPED = re.compile(r"\\([&%$#_{}])")
# `~` is a non-breaking space in BibTeX: a literal tilde (in a title or a URL)
# must be written as \textasciitilde{} or it comes back as a space; a literal
# backslash is \textbackslash{}.
_SPECIALS = {
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "~": r"\textasciitilde{}",
    "\\": r"\textbackslash{}",
}
_TILDE = re.compile(r"\\textasciitilde(?:\{\}|\b)")
_BACKSLASH = re.compile(r"\\textbackslash(?:\{\}|\b)[ \t]*")
# What is left: formatting commands (\textbf, \emph, \url, ...) whose argument
# is the text itself, and control symbols such as `\-` (a hyphenation hint).
_COMMAND = re.compile(r"\\[A-Za-z]+[ \t]*")
_CONTROL_SYMBOL = re.compile(r"\\([^A-Za-z\ue000-\ue003])")
_SYMBOL_TEXT = {" ": " ", ",": " ", ";": " ", ":": " ", "!": "", "-": "", "/": "", "\\": " ", "\n": " "}
_NEEDS_WORK = re.compile(r"[\\{}~]")

# Private-use placeholders keep escaped characters apart from markup while the markup goes.
_OPEN, _CLOSE, _TILDE_MARK, _BACKSLASH_MARK = "\ue000", "\ue001", "\ue002", "\ue003"


def _accented(match: re.Match) -> str:
    letter = match.group(2)
    if letter.startswith("\\"):
        letter = letter[1]  # the dotless i/j carries the accent as a plain i/j
    return letter + _ACCENTS[match.group(1)]


def latex_to_text(value: str, *, keep_lines: bool = False) -> str:
    """`{FlashAttention}-2: Fast \\& {\\"u}ber` -> `FlashAttention-2: Fast & über`.

    Runs of spaces collapse; with `keep_lines` (notes) the text is kept as
    written, line breaks and indentation included.
    """
    if not value:
        return ""
    if _NEEDS_WORK.search(value) is None:  # most fields: nothing to convert
        text = value
    else:
        text = _TILDE.sub(_TILDE_MARK, value)
        text = _BACKSLASH.sub(_BACKSLASH_MARK, text)
        text = _ACCENT.sub(_accented, text)
        text = _LETTER.sub(lambda m: _LETTERS[m.group(1)], text)
        # Escaped braces are kept (as placeholders while grouping braces go).
        text = _ESCAPED.sub(lambda m: {"{": _OPEN, "}": _CLOSE}.get(m.group(1), m.group(1)), text)
        text = _COMMAND.sub("", text)
        text = _CONTROL_SYMBOL.sub(lambda m: _SYMBOL_TEXT.get(m.group(1), m.group(1)), text)
        text = text.replace("{", "").replace("}", "").replace("~", " ")
        text = text.replace(_OPEN, "{").replace(_CLOSE, "}").replace(_TILDE_MARK, "~").replace(_BACKSLASH_MARK, "\\")
    if keep_lines:
        text = "\n".join(line.rstrip() for line in text.strip("\n").splitlines())
    else:
        text = " ".join(text.split())
    return text if text.isascii() else unicodedata.normalize("NFC", text)


_BRACES = {"{": r"\{", "}": r"\}"}


def text_to_latex(value: str) -> str:
    """Escape what would break a BibTeX value; braces are balanced by construction."""
    return "".join(_SPECIALS.get(ch) or _BRACES.get(ch, ch) for ch in value)


# LaTeX source as arXiv gives titles and abstracts: commands, control symbols and $math$ are markup.
_MARKUP = re.compile(r"\\[A-Za-z]+|\$[^$]+\$")
_SOURCE_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|\\\Z|\$[^$]*\$|[&%#_$]", re.S)


def _balanced(value: str) -> bool:
    depth = 0
    for match in re.finditer(r"\\.|[{}]", value, re.S):
        token = match.group()
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _source_token(match: re.Match) -> str:
    token = match.group()
    if token == "\\":
        return r"\textbackslash{}"  # a lone backslash at the very end would escape the field's closing brace
    if token.startswith("\\"):
        return token  # \emph, \alpha, \&, \{ ...: already LaTeX
    if len(token) > 1:  # $...$: math is kept as written, but % and # would still end or break the field
        return token.replace("%", r"\%").replace("#", r"\#")
    return _SPECIALS[token]


def latex_source_to_bibtex(value: str) -> str:
    """A text that is LaTeX source already (arXiv's titles and abstracts: `\\emph{...}`, `$O(n^2)$`) as a
    BibTeX value: its markup is kept, not escaped a second time (`\\textbackslash{}emph\\{`); only a bare
    & % # _ or an unpaired $ is escaped. Text without markup, or with unbalanced braces, is escaped as
    plain text (`text_to_latex`)."""
    if not _MARKUP.search(value) or not _balanced(value):
        return text_to_latex(value)
    return _SOURCE_TOKEN.sub(_source_token, value)


def url_to_bibtex(url: str) -> str:
    """A URL field is verbatim for biblatex/hyperref: write it as it is (a
    `\\&` or `\\textasciitilde{}` would end up in the link), escaping only
    braces, which would unbalance the field."""
    return "".join(_BRACES.get(ch, ch) for ch in url)


def url_from_bibtex(value: str) -> str:
    """Read a URL field: verbatim, but undo the escapes older exports (and
    some tools) write, and never turn `~` into a space."""
    text = _TILDE.sub("~", value.strip())
    return _ESCAPED.sub(lambda m: m.group(1), text)


def authors_from_bibtex(value: str) -> str:
    """`Dao, Tri and Fu, Daniel Y.` -> `Tri Dao, Daniel Y. Fu` (how the log shows names)."""
    names = [n.strip() for n in re.split(r"\s+and\s+", latex_to_text(value)) if n.strip()]
    out = []
    for name in names:
        if "," in name:
            last, _, first = name.partition(",")
            name = f"{first.strip()} {last.strip()}".strip()
        out.append(name)
    return ", ".join(out)


def authors_to_bibtex(value: str) -> str:
    return " and ".join(text_to_latex(n.strip()) for n in value.split(",") if n.strip())
