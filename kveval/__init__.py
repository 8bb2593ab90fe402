"""kveval: did a serving change make the answers worse, beyond the noise?"""

__version__ = "0.1.0"
