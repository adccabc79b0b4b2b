"""stdout read by a program or a file (not a terminal): every line without the trailing spaces
rich pads it with (a table's title centred or left-justified to the table's width, a wrapped
note filled to the console's width), so a pasted or diffed report carries none."""


class TrimmedLines:
    """A text stream whose lines lose their trailing spaces. Spaces at the end of a write are
    held back until the next write says whether the line goes on (they are written) or ends
    (they are dropped); the stream's other methods are the wrapped stream's."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self._spaces = ""

    def write(self, text: str) -> int:
        given = len(text)
        *ended, last = (self._spaces + text).split("\n")
        body = last.rstrip(" ")
        self._spaces = last[len(body):]
        out = "".join(line.rstrip(" ") + "\n" for line in ended) + body
        if out:
            self._stream.write(out)
        return given

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
