#!/usr/bin/env python3
"""Creates the example shop database of the local-mcp task: make_db.py PATH."""

import sqlite3
import sys

CUSTOMERS = [
    (1, "Ana", "Lisbon"),
    (2, "Bruno", "Porto"),
    (3, "Carla", "Lisbon"),
    (4, "Diogo", "Faro"),
    (5, "Eva", "Lisbon"),
    (6, "Filipe", "Porto"),
]
ORDERS = [
    (1, 1, "shipped", 120),
    (2, 1, "pending", 80),
    (3, 2, "shipped", 45),
    (4, 3, "shipped", 200),
    (5, 3, "cancelled", 60),
    (6, 4, "shipped", 75),
    (7, 5, "shipped", 33),
    (8, 5, "pending", 18),
    (9, 6, "shipped", 99),
    (10, 3, "shipped", 7),
]

db = sqlite3.connect(sys.argv[1])
db.executescript("""
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     status TEXT NOT NULL, total INTEGER NOT NULL);
""")
db.executemany("INSERT INTO customers VALUES (?, ?, ?)", CUSTOMERS)
db.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", ORDERS)
db.commit()
