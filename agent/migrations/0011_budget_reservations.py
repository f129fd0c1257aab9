from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent", "0010_ledger_keyset_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="turn",
            name="tokens_reserved",
            field=models.PositiveBigIntegerField(default=0),
        ),
    ]
