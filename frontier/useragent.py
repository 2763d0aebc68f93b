"""The crawler's identity, sent with every request and matched against robots.txt."""

#: Product token matched against robots.txt ``User-agent`` lines (RFC 9309 §2.2.1).
ROBOTS_TOKEN = "trawl"

#: Default contact URL; a real crawl should set its own (``user_agent`` setting).
DEFAULT_CONTACT = "https://github.com/trawl-crawler/trawl"


def user_agent(contact: str = DEFAULT_CONTACT, version: str = "0.1") -> str:
    """The User-Agent header: product token, version and a contact URL."""
    return f"Trawl/{version} (+{contact})"
