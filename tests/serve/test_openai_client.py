"""The official openai client against `servecap serve`: completions and chat, streamed or not."""

import pytest

openai = pytest.importorskip("openai")


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0,
                         timeout=30)


def test_models_lists_the_served_model(client):
    assert [m.id for m in client.models.list()] == ["tiny-llama"]


def test_completion_with_token_ids_returns_exactly_max_tokens(client):
    out = client.completions.create(model="tiny-llama", prompt=[5, 6, 7, 8, 9], max_tokens=7,
                                    temperature=0)
    assert out.choices[0].finish_reason == "length"
    assert out.usage.prompt_tokens == 5 and out.usage.completion_tokens == 7


def test_greedy_completion_is_deterministic(client):
    texts = {client.completions.create(model="tiny-llama", prompt=[1, 2, 3], max_tokens=6,
                                       temperature=0).choices[0].text for _ in range(2)}
    assert len(texts) == 1


def test_streamed_completion_has_one_chunk_per_token_and_usage_last(client):
    chunks = list(client.completions.create(
        model="tiny-llama", prompt="hello", max_tokens=9, stream=True, temperature=0,
        stream_options={"include_usage": True}))
    tokens = [c for c in chunks if c.choices]
    assert len(tokens) == 9 and tokens[-1].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 9
    assert chunks[-1].usage.prompt_tokens == len(b"hello")


def test_chat_completion_non_streaming(client):
    out = client.chat.completions.create(model="tiny-llama", max_tokens=5,
                                         messages=[{"role": "user", "content": "hi"}])
    assert out.choices[0].message.role == "assistant"
    assert out.usage.completion_tokens == 5


def test_chat_completion_streaming(client):
    chunks = list(client.chat.completions.create(
        model="tiny-llama", max_tokens=4, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "hi"}]))
    assert chunks[0].choices[0].delta.role == "assistant"
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content) == 4 and chunks[-1].usage.completion_tokens == 4


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="other", prompt=[1], max_tokens=1)


def test_request_past_max_model_len_is_400(client):
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        client.completions.create(model="tiny-llama", prompt=[1] * 2040, max_tokens=10)
