"""Excel capacity workbooks with live formulas (openpyxl)."""
