"""The DETAIL format of 23T01 and 23T02 (declared stable in
docs/drivers-errors.md) and the mapping of psycopg errors."""

import psycopg
import pytest
from psycopg.pq import DiagnosticField

import fencing
from fencing.errors import parse_detail


def test_stale_row():
    assert parse_detail("Relation public.t, key (id)=(1): presented token 33, "
                        "stored token 34 (monotonic mode).") == {
        "relation": "public.t", "key": "(id)=(1)", "presented": 33, "stored": 34, "mode": "monotonic"}


def test_stale_key_with_separators_inside():
    detail = ('Relation "my schema"."t, x", key (id, name)=(7, a: presented token 1, stored token 2 '
              '(strict mode).): presented token 5, stored token 9 (strict mode).')
    fields = parse_detail(detail)
    assert fields["presented"] == 5 and fields["stored"] == 9 and fields["mode"] == "strict"
    assert fields["key"] == "(id, name)=(7, a: presented token 1, stored token 2 (strict mode).)"


def test_stale_all_rows_and_hidden_values():
    assert parse_detail("Relation public.t, all rows: presented token 3, stored token (not visible) "
                        "(monotonic mode).") == {"relation": "public.t", "presented": 3, "mode": "monotonic"}
    assert parse_detail("Relation public.t, key (not visible): presented token 3, stored token 4 "
                        "(monotonic mode).") == {"relation": "public.t", "presented": 3, "stored": 4,
                                                 "mode": "monotonic"}


def test_stale_resource():
    assert parse_detail('Resource "order:"1"": presented token 1, stored token 2 (monotonic mode).') == {
        "resource": 'order:"1"', "presented": 1, "stored": 2, "mode": "monotonic"}


def test_missing():
    assert parse_detail("Relation public.t, key (id)=(1): no token presented, stored token 0.") == {
        "relation": "public.t", "key": "(id)=(1)", "stored": 0}
    with_note = ("Relation public.t, key (id)=(2): no token presented, stored token 5. fencing.token is 9, "
                 "set for the session by an earlier transaction (SET without LOCAL, or set_config(..., false)): "
                 "it is not used, a token counts only in the transaction that sets it.")
    assert parse_detail(with_note) == {"relation": "public.t", "key": "(id)=(2)", "stored": 5}


def test_unknown_detail():
    assert parse_detail("") == {}
    assert parse_detail("something else entirely") == {}


def server_error(sqlstate, detail, **fields):
    info = {DiagnosticField.SQLSTATE: sqlstate.encode(), DiagnosticField.MESSAGE_DETAIL: detail.encode()}
    names = {"table": DiagnosticField.TABLE_NAME, "column": DiagnosticField.COLUMN_NAME,
             "constraint": DiagnosticField.CONSTRAINT_NAME, "schema": DiagnosticField.SCHEMA_NAME}
    info.update({names[k]: v.encode() for k, v in fields.items()})
    return psycopg.IntegrityError("refused", info=info)


def test_translate_stale():
    error = fencing.translate(server_error(
        "23T01", "Relation public.t, key (id)=(1): presented token 33, stored token 34 (monotonic mode).",
        table="t", column="last_fencing_token", constraint="fencing_stale_token", schema="public"))
    assert isinstance(error, fencing.StaleTokenError)
    assert isinstance(error, psycopg.IntegrityError) and isinstance(error, fencing.FencingError)
    assert error.sqlstate == "23T01"
    assert (error.schema, error.table, error.column, error.constraint, error.key, error.presented,
            error.stored) == ("public", "t", "last_fencing_token", "fencing_stale_token", "(id)=(1)", 33, 34)


def test_translate_missing_and_others():
    error = fencing.translate(server_error(
        "23T02", "Relation public.t, key (id)=(1): no token presented, stored token 4.", table="t"))
    assert isinstance(error, fencing.MissingTokenError)
    assert (error.presented, error.stored, error.key) == (None, 4, "(id)=(1)")
    other = server_error("23505", "Key (id)=(1) already exists.")
    assert fencing.translate(other) is other
    plain = ValueError("x")
    assert fencing.translate(plain) is plain


def test_token_and_argument_checks():
    from fencing._fenced import token_of
    assert token_of(7) == 7
    for bad in (0, -1, True, "7", None):
        with pytest.raises(ValueError):
            token_of(bad)
    with pytest.raises(ValueError):
        fencing.Lease("", "r", holder="h", ttl=0)
    with pytest.raises(ValueError):
        fencing.Lease("", "r", holder="h", ttl=1, wait=-1)
