"""The plain chat template `servecap serve` applies (it runs no Jinja chat templates): one
`role: content` line per message, then the assistant's turn. One copy, read by the server to
build a chat prompt and by `servecap load` to count that prompt's tokens the server's way."""

ASSISTANT_TURN = "assistant:"


def plain_chat_prompt(messages: list[tuple[str, str]]) -> str:
    """(role, text) pairs as a role-tagged transcript ending in the assistant's turn:
    'system: ...\\nuser: ...\\nassistant:'."""
    return "\n".join([f"{role}: {text}" for role, text in messages] + [ASSISTANT_TURN])
