# Written by hand. Django gives every indexed varchar column on PostgreSQL a second index,
# with varchar_pattern_ops, for LIKE 'prefix%' queries. Nothing here asks one of these (ids
# and claim keys are looked up whole), and each costs every creation an index insertion:
# the three on the tables a creation writes are dropped. A later AlterField of one of these
# columns would bring its index back; tests/notify/test_indexes.py would say so.

from django.db import migrations

PATTERN_INDEXES = {
    "notify_event_id_642b8253_like": "notify_event (id varchar_pattern_ops)",
    "notify_claim_key_ab1028d8_like": "notify_claim (key varchar_pattern_ops)",
    "notify_vaultentry_event_id_ca93a78d_like": "notify_vaultentry (event_id varchar_pattern_ops)",
}


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for name in PATTERN_INDEXES:
            schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for name, target in PATTERN_INDEXES.items():
            schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {target}")


class Migration(migrations.Migration):

    dependencies = [
        ("notify", "0010_observation_effect"),
    ]

    operations = [migrations.RunPython(drop, create)]
