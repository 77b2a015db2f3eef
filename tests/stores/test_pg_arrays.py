"""The append statement's typed arrays (``postgres._arrays``) reach PostgreSQL as the same
arrays psycopg's own list dumper would send: whatever the values, each typed list equals,
on a real server, the plain list cast to its array type."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.stores.postgres._arrays import Byteas, Float8s, Int8s, Texts, register

pytestmark = pytest.mark.postgres

INT8 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]))


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    seqs=st.lists(INT8, min_size=1, max_size=8),
    texts=st.lists(TEXT, min_size=1, max_size=8),
    ats=st.lists(st.floats(allow_nan=False), min_size=1, max_size=8),
    chains=st.lists(st.binary(max_size=40), min_size=1, max_size=8),
)
def test_typed_arrays_equal_what_psycopg_sends_for_plain_lists(
    postgres_dsn: str, seqs: list[int], texts: list[str], ats: list[float], chains: list[bytes]
) -> None:
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        register(conn.adapters)
        row = conn.execute(
            "SELECT %b::bigint[], %b::text[], %b::float8[], %b::bytea[], "
            "%b::bigint[] = %b::bigint[], %b::text[] = %b::text[], "
            "%b::float8[] = %b::float8[], %b::bytea[] = %b::bytea[]",
            (
                *(Int8s(seqs), Texts(texts), Float8s(ats), Byteas(chains)),
                *(Int8s(seqs), seqs, Texts(texts), texts),
                *(Float8s(ats), ats, Byteas(chains), chains),
            ),
        ).fetchone()
    assert row is not None
    got_seqs, got_texts, got_ats, got_chains, *same = row
    assert (got_seqs, got_texts, got_ats, got_chains) == (seqs, texts, ats, chains)
    assert same == [True, True, True, True]


def test_a_lone_surrogate_in_a_typed_text_array_is_refused_before_it_is_sent(
    postgres_dsn: str,
) -> None:
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        register(conn.adapters)
        with pytest.raises(UnicodeEncodeError):
            conn.execute("SELECT %b::text[]", (Texts(["ok", "\udc80"]),))
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection is still usable
