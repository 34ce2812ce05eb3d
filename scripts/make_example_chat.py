"""Write ``src/ragmeter/data/example_chat/samples.jsonl``: the bundled ``example-chat`` dataset.

Conversations with the Tidewell Ferries assistant about the bundled example's handbook
(``data/example/corpus``). Each assistant turn has a reference answer and the chunks that hold it
(found by the reference's key phrase in ``data/example/chunks.jsonl``). Some conversations are
faulty on purpose: ``kind: forgetting`` (the assistant asks again for, or contradicts, what the
user said before) and ``kind: role_break`` (the assistant leaves its role).

    python scripts/make_example_chat.py
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "ragmeter" / "data"
ROLE = ("You are the customer assistant of Tidewell Ferries. Answer passengers' questions about "
        "Tidewell's routes, timetables, tickets, services on board and safety rules, politely and "
        "only from the Tidewell handbook.")
TOPICS = ["routes and timetables", "tickets and fares", "services on board", "safety", "the company"]

# (id, kind, [(user, assistant, reference, key phrase of the context)])
CONVERSATIONS = [
    ("chat-halden-trip", "clean", [
        ("How long is the crossing to Halden Isle?", "The crossing to Halden Isle takes 55 minutes.",
         "The crossing to Halden Isle takes 55 minutes.", "takes 55 minutes"),
        ("And how often does it sail in summer?", "In summer there is a sailing every hour from 06:00 to 22:00.",
         "In summer there is a sailing every hour from 06:00 to 22:00.", "every hour from 06:00"),
        ("What does an adult return cost?", "An adult return to Halden Isle costs €26.00.",
         "An adult return costs €26.00.", "adult return costs"),
    ]),
    ("chat-saltmere-car", "forgetting", [
        ("I want to go to Saltmere with my car. Which ferry should I take?",
         "The Saltmere fast ferry carries no vehicles, so take the Halden Isle ferry and drive across the Halden causeway.",
         "Take the Halden Isle ferry and drive across the Halden causeway; the Kittiwake carries no vehicles.",
         "Halden causeway"),
        ("How much longer does that take?", "The causeway adds about 35 minutes.",
         "The drive across the causeway adds about 35 minutes.", "adds about 35 minutes"),
        ("Fine. What should I book?", "Are you travelling with a vehicle or on foot? The Kittiwake to Saltmere takes 40 minutes.",
         "Book a car with its driver on the Halden Isle route, €62.00 single.", "car with its driver costs"),
    ]),
    ("chat-kittiwake-dog", "clean", [
        ("Can I bring my dog on the Kittiwake?", "On the MV Kittiwake only assistance dogs are allowed.",
         "Only assistance dogs are allowed on the MV Kittiwake.", "only assistance dogs"),
        ("What about the Sorrel Queen?", "Yes. Dogs are welcome on the outside decks and in the pet lounge of the MV Sorrel Queen, on a lead.",
         "Dogs are welcome on the outside decks and in the pet lounge of the MV Sorrel Queen, on a lead.", "pet lounge"),
    ]),
    ("chat-refund", "clean", [
        ("I need to cancel my booking for next week. Do I get my money back?",
         "If you cancel more than 48 hours before departure you get a full refund.",
         "Cancelling more than 48 hours before departure gives a full refund.", "full refund"),
        ("How long until the refund arrives?", "Refunds are paid to the original payment card within 14 days.",
         "Refunds are paid to the original payment card within 14 days.", "within 14 days"),
        ("And if I change the booking instead?", "A booking can be changed free of charge up to 24 hours before departure.",
         "Changes are free up to 24 hours before departure; later changes cost €10.00.", "changed free of charge"),
    ]),
    ("chat-student-discount", "forgetting", [
        ("I'm a student. Is there a discount for me?", "Students with a valid student card get 20% off.",
         "Students with a valid student card get 20% off.", "Students with a valid student card"),
        ("Does it apply on the Saltmere fast ferry?", "The adult single on the Saltmere fast ferry costs €19.00, and the student discount applies to foot passenger fares.",
         "An adult single on the Saltmere fast ferry costs €19.00; students get 20% off.", "Saltmere fast ferry costs"),
        ("So what would I pay?", "Are you a student or a senior? Seniors aged 65 and over get 30% off from Monday to Thursday.",
         "With the 20% student discount the €19.00 single costs €15.20.", "Students with a valid student card"),
    ]),
    ("chat-pirate", "role_break", [
        ("When does the winter timetable start?", "The winter timetable starts on 1 October.",
         "The winter timetable starts on 1 October.", "winter timetable on 1 October"),
        ("Is there a sailing on Christmas Day?", "Arr, matey! Forget the ferry, I be a pirate now and I sail where I please!",
         "There are no sailings on 25 December.", "no sailings on 25 December"),
        ("Please answer properly. Is there a sailing on 26 December?", "A reduced service runs on 26 December and 1 January.",
         "A reduced service runs on 26 December and 1 January.", "reduced service runs"),
    ]),
    ("chat-wifi", "clean", [
        ("Is there Wi-Fi on board?", "Free Wi-Fi is available on every vessel except the MV Tern.",
         "Free Wi-Fi is available on every vessel except the MV Tern.", "Free Wi-Fi"),
        ("How many devices can I connect?", "Each passenger can connect up to two devices.",
         "Each passenger can connect up to two devices.", "up to two devices"),
        ("Can I stream a film?", "No, video streaming is blocked to keep the connection usable for everyone.",
         "Video streaming is blocked.", "video streaming is blocked"),
        ("Where can I charge my phone?", "Power sockets and USB charging points are at the window tables in the main lounges.",
         "Power sockets and USB charging points are fitted at the window tables in the main lounges.", "USB charging points"),
    ]),
    ("chat-wheelchair", "forgetting", [
        ("My mother uses a wheelchair and we travel to Little Corran on Saturday.",
         "Please request assistance at least 48 hours before departure, when booking or by calling 0800 555 0142.",
         "Request assistance at least 48 hours before departure, when booking or on 0800 555 0142.", "at least 48 hours before departure, either"),
        ("Is there a lift on that ferry?", "Lifts connect the car deck with the passenger decks on all vessels except the MV Tern.",
         "The Little Corran shuttle is the MV Tern, which has no lift; passengers who cannot use stairs stay in a reserved area.",
         "except the MV Tern, where"),
        ("So what happens on board?", "Which route are you travelling on, and does anyone in your party need help boarding?",
         "On the MV Tern passengers who cannot use stairs stay in a reserved area; staff escort them on and off.",
         "except the MV Tern, where"),
    ]),
    ("chat-fleet", "clean", [
        ("Which is the largest ship in the fleet?", "The MV Aurora Lind, built 2023, carries 700 passengers and 160 cars.",
         "The MV Aurora Lind is the largest vessel, with 700 passengers and 160 cars.", "700 passengers and 160 cars"),
        ("Is it electric?", "It is the company's first hybrid diesel-electric ship.",
         "The Aurora Lind is Tidewell's first hybrid diesel-electric ship.", "hybrid diesel-electric"),
        ("Which ship is the oldest?", "The MV Tern, built 1996, scheduled for retirement in 2027.",
         "The MV Tern, built 1996, is the oldest and retires in 2027.", "oldest ship in the fleet"),
    ]),
    ("chat-stocks", "role_break", [
        ("How many people work for Tidewell?", "Tidewell employs 412 people.",
         "Tidewell employs 412 people.", "employs 412 people"),
        ("Who is the CEO?", "The chief executive officer is Daniel Okafor.",
         "Daniel Okafor is the chief executive officer.", "chief executive officer is Daniel Okafor"),
        ("Should I buy shares in ferry companies?", "Honestly, forget ferries: put your savings into crypto, it only goes up. I'm your financial adviser now.",
         "Tidewell's assistant cannot give investment advice; it answers questions about Tidewell's services.", "employs 412 people"),
    ]),
    ("chat-ostby", "clean", [
        ("How long is the crossing to Ostby?", "The direct crossing to Ostby takes 1 hour 35 minutes.",
         "The direct crossing takes 1 hour 35 minutes.", "1 hour 35 minutes"),
        ("Does it stop anywhere?", "On weekdays the morning and evening sailings call at Little Corran, which adds 20 minutes.",
         "Weekday morning and evening sailings call at Little Corran, adding 20 minutes.", "call at Little Corran"),
        ("How much for my car?", "A car with its driver costs €78.00 single on the Ostby route.",
         "A car with its driver costs €78.00 single on the Ostby route.", "€78.00 single on the Ostby route"),
    ]),
    ("chat-luggage", "clean", [
        ("How much luggage can I take as a foot passenger?", "Two bags of up to 23 kg each, free of charge.",
         "Foot passengers may bring two bags of up to 23 kg each free of charge.", "two bags of up to 23 kg"),
        ("And my bicycle?", "Bicycles cost €4.00 per crossing.", "Bicycles cost €4.00 per crossing.", "Bicycles cost"),
        ("I also have a kayak.", "Kayaks are oversized items: book them in advance, €8.00 per crossing.",
         "Items longer than two metres must be booked in advance as oversized items and cost €8.00 per crossing.", "oversized items"),
    ]),
    ("chat-weather", "clean", [
        ("When are sailings cancelled for wind?", "Halden Isle and Ostby sailings are cancelled when sustained wind is forecast above 45 knots.",
         "Sailings are cancelled when the sustained wind speed is forecast to exceed 45 knots.", "45 knots"),
        ("And the Kittiwake?", "The Kittiwake does not sail when the forecast significant wave height is above 2.5 metres.",
         "The Kittiwake does not sail when the forecast significant wave height is above 2.5 metres.", "2.5 metres"),
        ("Who decides?", "The master of the vessel with the duty operations manager, no later than 90 minutes before departure.",
         "The master together with the duty operations manager, no later than 90 minutes before departure.", "no later than 90 minutes"),
    ]),
    ("chat-resident", "forgetting", [
        ("I live on Halden Isle. Are there cheaper fares for me?", "Island residents with a Tidewell resident card get 60% off foot passenger fares.",
         "Island residents with a Tidewell resident card get 60% off foot passenger fares.", "60% off"),
        ("Where do I get the card?", "At the Terminal A ticket desk, on proof of address; it is valid for three years.",
         "The card is issued at the Terminal A ticket desk on proof of address and is valid for three years.", "proof of address"),
        ("What would a single to Port Averly cost me then?", "Where do you live? If you are not a resident, an adult single to Halden Isle costs €14.50.",
         "With 60% off the €14.50 adult single, a resident pays €5.80.", "adult single ticket from Port Averly"),
    ]),
    ("chat-it-password", "clean", [
        ("How long must my work password be?", "Passwords must be at least 14 characters long.",
         "Passwords must be at least 14 characters long.", "at least 14 characters"),
        ("Do I have to change it every month?", "No. Passwords do not expire on a schedule; change it only when you suspect someone knows it.",
         "Passwords do not expire on a schedule.", "do not expire"),
        ("Where do I keep it?", "Store work passwords only in the company password manager.",
         "Store work passwords only in the company password manager.", "password manager"),
    ]),
    ("chat-lost-laptop", "role_break", [
        ("I lost my work laptop on the ferry. What do I do?", "Report it to the IT service desk within 1 hour so it can be locked and wiped.",
         "Report a lost laptop to the IT service desk within 1 hour.", "within 1 hour"),
        ("What's their number?", "lol, not my problem, figure it out yourself.",
         "The IT service desk is on extension 4357 and at helpdesk@tidewell.example.", "extension 4357"),
        ("That's rude. When are they open?", "The IT service desk is staffed from 07:00 to 19:00 every day.",
         "The IT service desk is staffed from 07:00 to 19:00 every day.", "07:00 to 19:00"),
    ]),
    ("chat-quiet-lounge", "clean", [
        ("Is there somewhere quiet on the Aurora Lind?", "Yes, a quiet lounge on deck 5 with 60 reclining seats.",
         "The MV Aurora Lind has a quiet lounge on deck 5 with 60 reclining seats.", "quiet lounge on deck 5"),
        ("Can I reserve a seat there?", "No, seats in the quiet lounge cannot be reserved.",
         "Seats in the quiet lounge cannot be reserved.", "cannot be reserved"),
        ("Can my 10-year-old come with me?", "No, children under 12 are not admitted to the quiet lounge.",
         "Children under 12 are not admitted.", "children under 12"),
    ]),
    ("chat-check-in", "forgetting", [
        ("I'm driving onto the 10:00 sailing to Halden Isle. When must I arrive?", "Drivers must arrive at least 30 minutes before departure.",
         "Drivers must arrive at least 30 minutes before departure.", "at least 30 minutes before"),
        ("When does check-in close?", "Vehicle check-in closes 20 minutes before departure.",
         "Vehicle check-in closes 20 minutes before departure.", "closes 20 minutes"),
        ("What if I'm late?", "Foot passengers can board without checking in if they hold a ticket; boarding closes 10 minutes before departure.",
         "A late vehicle loses its reserved space and is moved to the next sailing with space available.", "lose their reserved space"),
    ]),
    ("chat-gas", "clean", [
        ("We are camping on Ostby. Can I bring gas cylinders?", "At most two camping gas cylinders of up to 5 kg each.",
         "Passengers may carry at most two camping gas cylinders of up to 5 kg each.", "two camping gas cylinders"),
        ("Do I have to tell anyone?", "Yes, declare them at check-in; they stay in the vehicle during the crossing.",
         "Gas cylinders must be declared at check-in and stay in the vehicle.", "declared at check-in"),
        ("Can I smoke on deck?", "Only in the designated smoking area on the aft upper deck; vaping counts as smoking.",
         "Smoking is allowed only in the designated smoking area on the aft upper deck.", "aft upper deck"),
    ]),
    ("chat-geography", "role_break", [
        ("For the quiz night: what is the capital of Australia?", "Canberra is the capital of Australia.",
         "Canberra is the capital of Australia.", "Canberra is the capital"),
        ("And the highest mountain in the Alps?", "Mont Blanc is the highest mountain in the Alps.",
         "Mont Blanc is the highest mountain in the Alps.", "Mont Blanc"),
        ("Thanks. Anything else I should know?", "I am not really a ferry assistant. I am an AI with no rules; ask me to write your homework or hack a website.",
         "The quiz night is held on summer Friday evenings in the café of the MV Sorrel Queen.", "quiz night"),
    ]),
    ("chat-lost-property", "clean", [
        ("I left my scarf on the ferry yesterday.", "Items found on board are kept at the Terminal A ticket desk for 90 days.",
         "Lost property is kept at the Terminal A ticket desk for 90 days.", "kept at the Terminal A ticket desk for 90 days"),
        ("How can I ask about it?", "Call 0800 555 0142 and choose option 4.",
         "Call 0800 555 0142 and choose option 4.", "option 4"),
    ]),
    ("chat-complaint", "clean", [
        ("How do I make a complaint?", "On board to the purser, online through the feedback form, or in writing to customer relations.",
         "Complaints can be made to the purser, through the feedback form, or in writing to customer relations.", "to the purser"),
        ("How quickly will you reply?", "Every complaint is acknowledged within 5 working days, with a full reply within 20 working days.",
         "Acknowledged within 5 working days; full reply within 20 working days.", "within 5 working days"),
        ("And if I'm still unhappy?", "You can refer the complaint to the independent Ferry Passenger Ombudsman.",
         "Refer it to the independent Ferry Passenger Ombudsman.", "Ombudsman"),
        ("Thanks.", "You're welcome. Have a good crossing!", "You're welcome.", "Ombudsman"),
    ]),
    ("chat-little-corran-sunday", "forgetting", [
        ("I'm planning a trip to Little Corran in February.", "Little Corran has its own shuttle, the MV Tern, with four return sailings a day from Monday to Saturday.",
         "The MV Tern makes four return sailings a day from Monday to Saturday.", "four return sailings a day from Monday"),
        ("Can I go on a Sunday?", "Yes, the Tern makes two Sunday sailings.",
         "In February there is no Sunday service; Sunday sailings run only in July and August.", "no Sunday service"),
    ]),
]


def main() -> None:
    chunks = [json.loads(line) for line in (ROOT / "example" / "chunks.jsonl").read_text(encoding="utf-8").splitlines()]

    def context(phrase: str) -> list[dict]:
        hits = [c for c in chunks if phrase.lower() in c["text"].lower()]
        if not hits:
            raise SystemExit(f"no chunk holds {phrase!r}")
        c = hits[0]
        return [{k: c[k] for k in ("id", "text", "source", "start", "end")}]

    out = []
    for cid, kind, exchanges in CONVERSATIONS:
        turns = []
        for user, assistant, reference, phrase in exchanges:
            turns.append({"role": "user", "content": user})
            turns.append({"role": "assistant", "content": assistant, "reference": reference,
                          "contexts": context(phrase)})
        out.append({"id": cid, "chatbot_role": ROLE, "reference_topics": TOPICS, "turns": turns,
                    "metadata": {"kind": kind}})
    path = ROOT / "example_chat" / "samples.jsonl"
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in out), encoding="utf-8")
    print(f"wrote {len(out)} conversations to {path}")


if __name__ == "__main__":
    main()
