"""Our kinds, one module each holding every rule of that kind.

`registry.KINDS` lists them; nothing outside this package names a kind.
"""
