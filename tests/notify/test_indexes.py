"""The tables a creation writes carry only the indexes something reads."""

import pytest
from django.db import connection

CREATION_TABLES = ("notify_event", "notify_claim", "notify_vaultentry", "notify_transition")


@pytest.mark.postgres
@pytest.mark.django_db
def test_no_table_a_creation_writes_has_a_pattern_ops_index():
    # Django adds a varchar_pattern_ops twin to every indexed varchar column for LIKE 'x%';
    # nothing asks one here, and each would cost every creation an index insertion.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = ANY(%s) AND indexdef LIKE %s",
            [list(CREATION_TABLES), "%pattern_ops%"],
        )
        assert cursor.fetchall() == []
