"""The pure ledger: memory arithmetic in integer bytes, standard library only."""
