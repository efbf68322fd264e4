"""abtest: did this prompt wording change help, given the same retrieved material?"""

__version__ = "0.1.0"
