from kveval.safe import markdown, one_line, redact_url, terminal


def test_terminal_strips_escape_sequences_and_controls():
    hostile = "a\x1b[2Jb\x1b]0;title\x07c\rd\x07e\x9b31mf\tg\nh\x1b]8;;http://x\x1b\\i"
    assert terminal(hostile) == "abcdef\tg\nhi"


def test_one_line_folds_newlines():
    assert one_line("a\n\n b\x1b[31m c") == "a b c"


def test_markdown_cannot_inject_structure():
    text = "# Heading [link](http://evil) | <img src=x> **bold**"
    out = markdown(text)
    assert out.startswith("\\#")
    assert "](" not in out.replace("\\](", "")
    assert "<img" not in out and "\\|" in out and "\\*\\*" in out


def test_redact_url_drops_credentials_and_query():
    assert redact_url("http://u:p%40ss@host:8000/v1/?key=s#f") == "http://host:8000/v1"
    assert redact_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
    assert redact_url("http://[::1/v1") == "<unparseable URL>"
